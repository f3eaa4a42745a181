//! The ways the classic sweep can run that give bitwise the same fields at
//! different speeds, which the driver times against each other before the
//! rehearsal (`crate::kernel_choice`): the row kernel with or without
//! software prefetch (`--prefetch auto`), and the new field written with
//! streaming or cached stores (`--stores auto`).
//!
//! Which of them wins from memory is the machine's business, not the
//! sizes': no prefetch won at size L on a Zen 5 guest and lost on a Zen 4
//! one, and streaming stores, 4 bytes per point less traffic, measured up
//! to 7% faster on the guest that chose them but 0.85-1.0x cached stores
//! on a Zen 3 one (notes/cpu-perf.md).

/// One way of running the classic sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Whether the row kernel prefetches its input rows.
    pub prefetch: bool,
    /// Whether `next` is written with streaming (non-temporal) stores.
    pub streaming: bool,
}

impl Variant {
    /// Its name, saying only what an offer varies: `prefetch`,
    /// `cached stores`, `no prefetch, streaming stores`, ...
    fn name(self, prefetch: bool, stores: bool) -> String {
        let mut parts = Vec::new();
        if prefetch {
            parts.push(if self.prefetch {
                "prefetch"
            } else {
                "no prefetch"
            });
        }
        if stores {
            parts.push(if self.streaming {
                "streaming stores"
            } else {
                "cached stores"
            });
        }
        parts.join(", ")
    }
}

/// The variants a backend offers the driver, each with its name, the one
/// it starts with first; empty when there is nothing to choose.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    variants: Vec<(Variant, String)>,
}

impl Offer {
    /// The variants from `start` that vary its prefetch when `prefetch`
    /// and its stores when `stores` (both: all four), `start` first.
    pub fn new(start: Variant, prefetch: bool, stores: bool) -> Offer {
        let axis = |offered: bool, first: bool| {
            if offered {
                vec![first, !first]
            } else {
                vec![first]
            }
        };
        let mut variants = Vec::new();
        for streaming in axis(stores, start.streaming) {
            for pf in axis(prefetch, start.prefetch) {
                let v = Variant {
                    prefetch: pf,
                    streaming,
                };
                variants.push((v, v.name(prefetch, stores)));
            }
        }
        if variants.len() < 2 {
            variants.clear();
        }
        Offer { variants }
    }

    /// The variants' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.variants.iter().map(|(_, n)| n.clone()).collect()
    }

    /// Variant `index`, if offered.
    pub fn get(&self, index: usize) -> Option<Variant> {
        self.variants.get(index).map(|(v, _)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: Variant = Variant {
        prefetch: true,
        streaming: true,
    };

    #[test]
    fn an_offer_varies_only_what_is_left_to_it_and_starts_with_the_start() {
        assert!(Offer::new(START, false, false).names().is_empty());
        assert!(Offer::new(START, false, false).get(0).is_none());
        let pf = Offer::new(START, true, false);
        assert_eq!(pf.names(), ["prefetch", "no prefetch"]);
        assert_eq!(pf.get(0), Some(START));
        assert_eq!(
            pf.get(1),
            Some(Variant {
                prefetch: false,
                streaming: true
            })
        );
        assert!(pf.get(2).is_none());
        let cached = Variant {
            prefetch: false,
            streaming: false,
        };
        let stores = Offer::new(cached, false, true);
        assert_eq!(stores.names(), ["cached stores", "streaming stores"]);
        assert!(stores.get(1).unwrap().streaming);
        assert!(!stores.get(1).unwrap().prefetch);
        let both = Offer::new(START, true, true);
        assert_eq!(
            both.names(),
            [
                "prefetch, streaming stores",
                "no prefetch, streaming stores",
                "prefetch, cached stores",
                "no prefetch, cached stores"
            ]
        );
        let all: Vec<_> = (0..4).map(|i| both.get(i).unwrap()).collect();
        for (i, a) in all.iter().enumerate() {
            assert!(all[i + 1..].iter().all(|b| b != a), "{all:?}");
        }
        assert_eq!(all[0], START);
    }
}

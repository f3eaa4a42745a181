//! The ways a CPU sweep can run that give bitwise the same fields at
//! different speeds, which the driver times against each other before the
//! rehearsal (`crate::kernel_choice`): the classic sweep's row kernel with
//! or without software prefetch (`--prefetch auto`) and its new field
//! written with streaming or cached stores (`--stores auto`); the temporal
//! wavefront's tile height (without `--tile-rows`).
//!
//! Which of them wins is the machine's business, not the sizes': no
//! prefetch won at size L on a Zen 5 guest and lost on a Zen 4 one,
//! streaming stores, 4 bytes per point less traffic, measured up to 7%
//! faster on the guest that chose them but 0.85-1.0x cached stores on a
//! Zen 3 one, and tiles of 32 rows, the best at sizes M and L on earlier
//! guests, ran 0.8x tiles of 16 at L on two threads of that Zen 3 guest
//! (notes/cpu-perf.md).

use crate::backend::kernel_variant::KernelVariant;

/// One way of running a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Whether the classic sweep's row kernel prefetches its input rows.
    pub prefetch: bool,
    /// Whether `next` is written with streaming (non-temporal) stores.
    pub streaming: bool,
    /// Rows per tile of the temporal wavefront.
    pub tile_rows: usize,
}

impl Variant {
    /// Its name, saying only what an offer varies: `prefetch`,
    /// `cached stores`, `no prefetch, streaming stores`, ...
    fn name(self, prefetch: bool, stores: bool) -> KernelVariant {
        KernelVariant::Classic {
            prefetch: prefetch.then_some(self.prefetch),
            streaming: stores.then_some(self.streaming),
        }
    }
}

/// The variants a backend offers the driver, each with its name, the one
/// it starts with first; empty when there is nothing to choose.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    variants: Vec<(Variant, KernelVariant)>,
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
                    ..start
                };
                variants.push((v, v.name(prefetch, stores)));
            }
        }
        Offer::of(variants)
    }

    /// The wavefront's variants from `start`: its tiles of `start`'s rows,
    /// then of each of `others` rows; empty without others.
    pub fn tiles(start: Variant, others: &[usize]) -> Offer {
        let variants = std::iter::once(start.tile_rows)
            .chain(others.iter().copied())
            .map(|tile_rows| {
                let v = Variant { tile_rows, ..start };
                (v, KernelVariant::Tiles(tile_rows))
            })
            .collect();
        Offer::of(variants)
    }

    /// The offer of `variants`: nothing to choose from unless there are
    /// two or more.
    fn of(mut variants: Vec<(Variant, KernelVariant)>) -> Offer {
        if variants.len() < 2 {
            variants.clear();
        }
        Offer { variants }
    }

    /// The variants' names, in order.
    pub fn names(&self) -> Vec<KernelVariant> {
        self.variants.iter().map(|(_, n)| *n).collect()
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
        tile_rows: 32,
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
                ..START
            })
        );
        assert!(pf.get(2).is_none());
        let cached = Variant {
            prefetch: false,
            streaming: false,
            ..START
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

    #[test]
    fn a_tile_offer_starts_with_the_start_and_varies_only_the_height() {
        assert!(Offer::tiles(START, &[]).names().is_empty());
        let tiles = Offer::tiles(START, &[16]);
        assert_eq!(tiles.names(), ["tiles of 32 rows", "tiles of 16 rows"]);
        assert_eq!(tiles.get(0), Some(START));
        assert_eq!(
            tiles.get(1),
            Some(Variant {
                tile_rows: 16,
                ..START
            })
        );
    }
}

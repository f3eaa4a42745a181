//! The instruction sets a hot loop is compiled for, chosen at run time.
//!
//! Rather than `-C target-cpu=native` on every build (a binary that cannot
//! run on an older node of the same cluster), each hot loop is an
//! `#[inline(always)]` body that [`multiversion!`] wraps once per
//! instruction set with `#[target_feature]`; [`Isa::detect`] picks the widest
//! copy this CPU runs. The CPU sweep and `bench stream`'s Sum13 both use it,
//! so the two are compiled alike and their bandwidths compare.

/// An instruction set a kernel copy exists for. Only [`Isa::detect`],
/// [`Isa::baseline`] and [`Isa::all_supported`] make one, so a value always
/// names a set this CPU supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Isa(Set);

/// The kernel copies: what an [`Isa`] selects ([`Isa::set`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// The build target's own features (SSE2 on x86-64).
    Baseline,
    /// AVX2.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 F and VL (256-bit vectors with AVX-512's registers and masks).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest instruction set this CPU supports that a kernel exists for.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl")
            {
                return Isa(Set::Avx512);
            }
            if std::is_x86_feature_detected!("avx2") {
                return Isa(Set::Avx2);
            }
        }
        Isa(Set::Baseline)
    }

    /// The kernel compiled for the build's target alone.
    pub fn baseline() -> Isa {
        Isa(Set::Baseline)
    }

    /// Every kernel this CPU can run, baseline first (for tests).
    pub fn all_supported() -> Vec<Isa> {
        let mut v = vec![Isa(Set::Baseline)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                v.push(Isa(Set::Avx2));
            }
            if Isa::detect() == Isa(Set::Avx512) {
                v.push(Isa(Set::Avx512));
            }
        }
        v
    }

    /// Which kernel copy this instruction set selects.
    pub fn set(self) -> Set {
        self.0
    }

    /// Short name for reports: `baseline`, `avx2` or `avx512`.
    pub fn name(self) -> &'static str {
        match self.0 {
            Set::Baseline => "baseline",
            #[cfg(target_arch = "x86_64")]
            Set::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Set::Avx512 => "avx512",
        }
    }
}

/// Defines `fn NAME(isa: Isa, args..) -> R` that runs `BODY(args..)`
/// compiled for the instruction set `isa` names. `BODY` must be
/// `#[inline(always)]`, so that each copy is vectorised for its own target
/// features (a callee without those features would not be).
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {
        $(#[$meta])*
        #[inline]
        $vis fn $name(isa: $crate::machine::isa::Isa, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            fn avx2($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,avx512f,avx512vl")]
            fn avx512($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            match isa.set() {
                $crate::machine::isa::Set::Baseline => $body($($arg),*),
                // SAFETY: an `Isa` naming AVX2 or AVX-512 is only made after
                // run-time detection found those features on this CPU.
                #[cfg(target_arch = "x86_64")]
                $crate::machine::isa::Set::Avx2 => unsafe { avx2($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                $crate::machine::isa::Set::Avx512 => unsafe { avx512($($arg),*) },
            }
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(always)]
    fn add(a: &[f32], b: &[f32], out: &mut [f32]) -> usize {
        for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
            *o = x + y;
        }
        out.len()
    }

    multiversion!(fn add_any(a: &[f32], b: &[f32], out: &mut [f32]) -> usize => add);

    #[test]
    fn every_copy_computes_the_same() {
        let a: Vec<f32> = (0..37).map(|x| x as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|x| 3.0 - x as f32).collect();
        let mut want = vec![0.0; 37];
        add(&a, &b, &mut want);
        for isa in Isa::all_supported() {
            let mut out = vec![0.0; 37];
            assert_eq!(add_any(isa, &a, &b, &mut out), 37);
            assert_eq!(out, want, "{}", isa.name());
        }
        assert_eq!(Isa::all_supported()[0], Isa::baseline());
        assert!(Isa::all_supported().contains(&Isa::detect()));
    }
}

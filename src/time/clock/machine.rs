//! The machine's clocks behind [`Source`]: on x86-64 Linux the TSC with
//! the CPU it was read on, `CLOCK_MONOTONIC`, `CLOCK_BOOTTIME` and the
//! kernel's clocksource; elsewhere (and under Miri, loom and shuttle) no
//! TSC, so every reading is a clock read.
//!
//! How the TSC and its CPU are read is asked once per process (CPUID and
//! a check of `TSC_AUX` against `getcpu`) and kept in each [`Machine`],
//! so a reading branches on a field next to the clock's own state.

use super::{Calibration, Source};

/// The calibration of this process's real clocks.
pub(crate) static MACHINE: Calibration = Calibration::new();

pub(crate) use imp::Machine;

#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(miri),
    not(loom),
    not(shuttle)
))]
mod imp {
    use super::{Calibration, Source, MACHINE};
    use crate::time::clock::NO_CPU;
    use std::sync::atomic::{AtomicU8, Ordering};

    /// The machine's clocks, with how this CPU reads its TSC.
    pub(crate) struct Machine {
        mode: TscMode,
    }

    impl Machine {
        pub(crate) fn new() -> Machine {
            Machine { mode: tsc_mode() }
        }
    }

    impl Source for Machine {
        #[inline]
        fn tsc(&self) -> Option<(u64, u32)> {
            if self.mode == TscMode::Rdpid {
                // The CPU before and after an unfenced `rdtsc`: the thread
                // can only move between CPUs at an interrupt, which splits
                // the instruction stream, so equal answers put the TSC
                // read on that CPU (or on one it left and came back to
                // between them: the TSCs are in step to within the margin
                // anyway, as the clock's docs say). Unequal: `NO_CPU`,
                // which matches no base.
                // One `asm!` block, so the three stay in program order.
                let (before, after): (u64, u64);
                let (lo, hi): (u32, u32);
                // SAFETY: `rdpid` exists on this CPU (`tsc_mode` checked
                // CPUID) and `rdtsc` on every x86_64 CPU; they read
                // `TSC_AUX` and the time-stamp counter into registers and
                // touch nothing else.
                unsafe {
                    std::arch::asm!(
                        "rdpid {before}",
                        "rdtsc",
                        "rdpid {after}",
                        before = out(reg) before,
                        after = out(reg) after,
                        out("eax") lo,
                        out("edx") hi,
                        options(nomem, nostack, preserves_flags),
                    )
                };
                let tsc = (u64::from(hi) << 32) | u64::from(lo);
                let cpu = if after == before {
                    before as u32
                } else {
                    NO_CPU
                };
                return Some((tsc, cpu));
            }
            self.tsc_otherwise()
        }

        fn monotonic(&self) -> u64 {
            crate::runtime::monotonic_ns()
        }

        fn suspended(&self) -> u64 {
            let boot = clock_ns(libc::CLOCK_BOOTTIME);
            boot.wrapping_sub(self.monotonic())
        }

        fn tsc_clocksource(&self) -> Option<bool> {
            std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .ok()
            .map(|s| s.trim() == "tsc")
        }

        fn calibration(&self) -> &Calibration {
            &MACHINE
        }
    }

    impl Machine {
        /// A reading on a CPU without `rdpid`.
        #[cold]
        fn tsc_otherwise(&self) -> Option<(u64, u32)> {
            match self.mode {
                TscMode::Rdtscp => Some(rdtscp()),
                _ => None,
            }
        }
    }

    /// How this CPU reads the TSC with the CPU it was read on.
    #[derive(Clone, Copy, PartialEq, Eq)]
    #[repr(u8)]
    enum TscMode {
        /// `rdpid`, `rdtsc`, `rdpid`: `rdpid` does not wait for earlier
        /// instructions, where `rdtscp` waits for every one (what that
        /// costs: BENCHMARKS.md, "The deadline clock after review").
        Rdpid = 1,
        /// `rdtscp`.
        Rdtscp = 2,
        /// Neither, or `TSC_AUX` does not hold the CPU's number: no
        /// extrapolation.
        None = 3,
    }

    /// `rdpid`: `TSC_AUX`, which Linux sets to `(node << 12) | cpu`.
    #[inline(always)]
    fn rdpid() -> u32 {
        let aux: u64;
        // SAFETY: only called where CPUID reports RDPID (`tsc_mode`); it
        // reads `TSC_AUX` into a register and touches nothing else.
        unsafe {
            std::arch::asm!("rdpid {}", out(reg) aux, options(nomem, nostack, preserves_flags))
        };
        aux as u32
    }

    /// `rdtscp`: the TSC and `TSC_AUX`, read together.
    #[inline(always)]
    fn rdtscp() -> (u64, u32) {
        let mut aux = 0u32;
        // SAFETY: only called where CPUID reports RDTSCP (`tsc_mode`); it
        // reads the time-stamp counter and writes `TSC_AUX` into `aux`, a
        // valid u32.
        let tsc = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
        (tsc, aux)
    }

    /// How to read the TSC and its CPU here (asked once per process):
    /// `rdpid` where CPUID reports it (leaf 7, ECX bit 22), else `rdtscp`
    /// (leaf 0x8000_0001, EDX bit 27), and only if the kernel keeps the
    /// CPU's number in `TSC_AUX` (its low 12 bits), checked against the
    /// `getcpu` system call (not the vDSO, which may read `TSC_AUX`
    /// itself), a few times in case the thread moves between the two.
    fn tsc_mode() -> TscMode {
        static MODE: AtomicU8 = AtomicU8::new(0);
        match MODE.load(Ordering::Relaxed) {
            1 => TscMode::Rdpid,
            2 => TscMode::Rdtscp,
            3 => TscMode::None,
            _ => {
                let mode = probe_tsc_mode();
                MODE.store(mode as u8, Ordering::Relaxed);
                mode
            }
        }
    }

    #[cold]
    fn probe_tsc_mode() -> TscMode {
        use core::arch::x86_64::__cpuid;
        let rdpid_ok = __cpuid(0).eax >= 7 && __cpuid(7).ecx & (1 << 22) != 0;
        let rdtscp_ok =
            __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0;
        let mode = if rdpid_ok {
            TscMode::Rdpid
        } else if rdtscp_ok {
            TscMode::Rdtscp
        } else {
            return TscMode::None;
        };
        // A process the kernel makes fault on `rdtsc` (`PR_SET_TSC`) reads
        // the clock instead.
        let mut tsc_mode = 0 as libc::c_int;
        // SAFETY: PR_GET_TSC writes one int through the pointer.
        let r = unsafe { libc::prctl(libc::PR_GET_TSC, &mut tsc_mode as *mut libc::c_int) };
        if r == 0 && tsc_mode != libc::PR_TSC_ENABLE {
            return TscMode::None;
        }
        // Every read whose thread stayed on one CPU (two `getcpu` calls
        // around it agree) must name that CPU, and at least half of the
        // tries must be such reads: a platform that passes `rdpid` through
        // without switching `TSC_AUX` per CPU fails as soon as a read
        // lands off the CPU its constant names.
        let (mut agreed, mut tries) = (0, 0);
        for _ in 0..16 {
            let (Some(first), aux, Some(second)) = (getcpu(), aux_of(mode), getcpu()) else {
                return TscMode::None;
            };
            tries += 1;
            if first != second {
                continue;
            }
            if aux & 0xfff != first {
                return TscMode::None;
            }
            agreed += 1;
        }
        if agreed * 2 >= tries {
            mode
        } else {
            TscMode::None
        }
    }

    /// `TSC_AUX` as `mode` reads it.
    fn aux_of(mode: TscMode) -> u32 {
        match mode {
            TscMode::Rdpid => rdpid(),
            _ => rdtscp().1,
        }
    }

    /// The CPU this thread runs on, from the system call (not the vDSO,
    /// which may read `TSC_AUX` itself); `None` if the call fails.
    fn getcpu() -> Option<u32> {
        let mut cpu = 0u32;
        // SAFETY: getcpu writes one u32 through the first pointer; the
        // others may be null.
        let r = unsafe {
            libc::syscall(
                libc::SYS_getcpu,
                &mut cpu as *mut u32,
                std::ptr::null_mut::<u32>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        (r == 0).then_some(cpu)
    }

    fn clock_ns(clock: libc::clockid_t) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to fill; the clocks asked for exist on
        // every Linux this runs on.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }
}

#[cfg(not(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(miri),
    not(loom),
    not(shuttle)
)))]
mod imp {
    use super::{Calibration, Source, MACHINE};

    /// The machine's clocks: no TSC here.
    pub(crate) struct Machine;

    impl Machine {
        pub(crate) fn new() -> Machine {
            Machine
        }
    }

    impl Source for Machine {
        fn tsc(&self) -> Option<(u64, u32)> {
            None
        }
        fn monotonic(&self) -> u64 {
            crate::runtime::monotonic_ns()
        }
        fn suspended(&self) -> u64 {
            0
        }
        fn tsc_clocksource(&self) -> Option<bool> {
            Some(false)
        }
        fn calibration(&self) -> &Calibration {
            &MACHINE
        }
    }
}

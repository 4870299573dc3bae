use deliloop::queue::DeliQueue;
use std::sync::{Arc, Barrier};
fn pin_to(cpu: usize) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
fn round(lanes: bool, producers: usize) -> f64 {
    let m = 500_000u64;
    let mut q = if lanes {
        DeliQueue::<u64>::with_lanes()
    } else {
        DeliQueue::new()
    };
    let b = Arc::new(Barrier::new(producers + 1));
    let hs: Vec<_> = (0..producers)
        .map(|_| {
            let p = q.producer();
            let b2 = b.clone();
            std::thread::spawn(move || {
                pin_to(1);
                b2.wait();
                for i in 0..m {
                    let _ = p.push(i, 0).unwrap();
                }
            })
        })
        .collect();
    b.wait();
    let t = std::time::Instant::now();
    let mut got = 0;
    let total = m * producers as u64;
    while got < total {
        q.maintain();
        while q.pop_swept(0).is_some() {
            got += 1;
        }
        std::hint::spin_loop();
    }
    let ns = t.elapsed().as_nanos() as f64 / total as f64;
    hs.into_iter().for_each(|h| h.join().unwrap());
    ns
}
fn main() {
    pin_to(0);
    let producers: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let only_lanes = std::env::args().any(|a| a == "lanes");
    for _ in 0..3 {
        let mut a: Vec<f64> = (0..7).map(|_| round(true, producers)).collect();
        a.sort_by(f64::total_cmp);
        if only_lanes {
            println!("lanes {:.1}", a[3]);
            continue;
        }
        let mut s: Vec<f64> = (0..7).map(|_| round(false, producers)).collect();
        s.sort_by(f64::total_cmp);
        println!("B{producers} lanes {:.1} stack {:.1}", a[3], s[3]);
    }
}

//! What a member's picture costs in memory: `richbot::media::scale` (what richbot runs
//! on every picture before the model sees it) on pictures a member can send, in a child
//! process each, whose peak resident memory (`VmHWM`) is read before and after.
//!
//! `cargo bench --bench pictures`: an all-zero 11,585 × 11,585 PNG (about 0.5 MB on
//! the wire, 134 million pixels), and a 4,032 × 3,024 photo-like JPEG (a phone's
//! 12 MP picture) and a noisy RGBA 4,096 × 4,096 PNG (the most pixels richbot reads),
//! each one at a time and three at once (three DMs sending together).

use std::io::Cursor;
use std::process::Command;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    if let Some(path) = args.next().filter(|a| a.starts_with('/')) {
        let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1);
        return child(&path, n);
    }
    let dir = std::env::temp_dir().join(format!("richbot-pictures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let zeros = dir.join("zeros.png");
    let mut png = Vec::new();
    image::GrayImage::new(11_585, 11_585).write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png).expect("png");
    std::fs::write(&zeros, &png).expect("write");
    let photo = dir.join("photo.jpg");
    let noisy = |x: u32, y: u32| ((x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) >> 13) as u8;
    let img = image::RgbImage::from_fn(4_032, 3_024, |x, y| image::Rgb([noisy(x, y), noisy(y, x), (x / 16) as u8]));
    let mut jpeg = Vec::new();
    img.write_to(&mut Cursor::new(&mut jpeg), image::ImageFormat::Jpeg).expect("jpeg");
    std::fs::write(&photo, &jpeg).expect("write");
    let largest = dir.join("largest.png");
    let mut big = Vec::new();
    image::RgbaImage::from_fn(4_096, 4_096, |x, y| image::Rgba([noisy(x, y), noisy(y, x), 0, 255]))
        .write_to(&mut Cursor::new(&mut big), image::ImageFormat::Png)
        .expect("png");
    std::fs::write(&largest, &big).expect("write");
    println!("picture                          bytes     at once  peak RSS before  peak RSS after  time     outcome");
    let me = std::env::current_exe().expect("exe");
    for (name, path, bytes) in [
        ("all-zero PNG 11585x11585", &zeros, png.len()),
        ("photo JPEG 4032x3024", &photo, jpeg.len()),
        ("RGBA PNG 4096x4096 (the most read)", &largest, big.len()),
    ] {
        for n in [1, 3] {
            let out = Command::new(&me).arg(path).arg(n.to_string()).output().expect("child");
            let line = String::from_utf8_lossy(&out.stdout);
            println!("{name:<32} {bytes:>9} {n:>7}  {}", line.trim());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Peak resident memory of this process so far, in MB.
fn peak_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    kb / 1024
}

/// Scales the picture at `path` on `n` threads at once, as `n` DMs' turns would.
fn child(path: &str, n: usize) {
    let bytes = std::fs::read(path).expect("read");
    let before = peak_mb();
    let start = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let bytes = bytes.clone();
            std::thread::spawn(move || richbot::media::scale(&bytes, 1024, 400_000))
        })
        .collect();
    let outcomes: Vec<String> = threads
        .into_iter()
        .map(|t| match t.join().expect("thread") {
            Ok((jpeg, w, h)) => format!("scaled {w}x{h} ({} bytes)", jpeg.len()),
            Err(why) => format!("refused: {why}"),
        })
        .collect();
    let took = start.elapsed().as_millis();
    println!("{before:>12} MB {:>12} MB  {took:>5} ms  {}", peak_mb(), outcomes[0]);
}

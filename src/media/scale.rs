//! Scaling a picture for a model: its header read first (a small file that would decode
//! to a huge image is refused before anything is allocated), decoded with an allocation
//! cap, one picture at a time in the whole process, shrunk to at most `max_px` on its
//! long side by area averaging (no full-size intermediate), and encoded as a JPEG of at
//! most `max_bytes` (lower quality first, then smaller). So any picture a member sends
//! costs at most about `MAX_DECODE_BYTES` beside its file, however many arrive at once
//! (`cargo bench --bench pictures` measures it).

use std::io::Cursor;
use std::sync::Mutex;

use image::{DynamicImage, GenericImageView, ImageReader};

/// Most pixels in a picture decoded at all (4096 × 4096: a 12 MP phone photo fits).
const MAX_PIXELS: u64 = 4096 * 4096;
/// Widest or tallest picture decoded at all, in pixels.
const MAX_SIDE: u32 = 16_384;
/// Memory one decode may take at most (`MAX_PIXELS` at 6 bytes a pixel: 16-bit RGB).
const MAX_DECODE_BYTES: u64 = 96 * 1024 * 1024;
/// JPEG qualities tried, best first.
const QUALITIES: [u8; 3] = [85, 70, 50];

/// One decode at a time, process-wide: three DMs sending pictures together cost what one does.
static DECODING: Mutex<()> = Mutex::new(());

/// `bytes` (any of JPEG, PNG, GIF, WebP) as a JPEG within the bounds, with its size.
pub fn scale(bytes: &[u8], max_px: u32, max_bytes: usize) -> Result<(Vec<u8>, u32, u32), String> {
    let reader = || ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| e.to_string());
    let (w, h) = reader()?.into_dimensions().map_err(|e| format!("not a picture richbot can read: {e}"))?;
    if u64::from(w) * u64::from(h) > MAX_PIXELS || w.max(h) > MAX_SIDE {
        return Err(format!(
            "the picture is {w} x {h} pixels, more than the {:.1} million richbot reads; send a smaller one",
            MAX_PIXELS as f64 / 1e6
        ));
    }
    let _one = DECODING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut reader = reader()?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| format!("not a picture richbot can read: {e}"))?;
    let mut side = max_px.max(16);
    let mut fitted = shrink(&decoded, side);
    drop(decoded);
    loop {
        let rgb = DynamicImage::ImageRgb8(fitted.to_rgb8());
        for quality in QUALITIES {
            let mut out = Vec::new();
            let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality);
            rgb.write_with_encoder(encoder).map_err(|e| e.to_string())?;
            if out.len() <= max_bytes {
                return Ok((out, rgb.width(), rgb.height()));
            }
        }
        if side <= 64 {
            return Err(format!("cannot make it fit in {max_bytes} bytes"));
        }
        side = side * 3 / 4;
        fitted = shrink(&fitted, side);
    }
}

/// `image` with its long side at most `side`, its aspect kept.
fn shrink(image: &DynamicImage, side: u32) -> DynamicImage {
    let (w, h) = image.dimensions();
    if w.max(h) > side { image.thumbnail(side, side) } else { image.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbaImage::from_fn(w, h, |x, y| image::Rgba([(x % 256) as u8, (y % 256) as u8, 128, 255]));
        let mut out = Vec::new();
        DynamicImage::ImageRgba8(img).write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png).expect("png");
        out
    }

    #[test]
    fn a_large_picture_is_shrunk_to_its_long_side_and_a_small_one_kept() {
        let (jpeg, w, h) = scale(&png(1200, 600), 400, 4_000_000).expect("scaled");
        assert_eq!((w, h), (400, 200));
        assert_eq!(image::guess_format(&jpeg).expect("format"), image::ImageFormat::Jpeg);
        let (_, w, h) = scale(&png(300, 200), 400, 4_000_000).expect("kept");
        assert_eq!((w, h), (300, 200));
    }

    #[test]
    fn a_byte_bound_makes_it_smaller_and_garbage_is_refused() {
        let noisy = |x: u32, y: u32| ((x.wrapping_mul(7919) ^ y.wrapping_mul(104_729)) % 256) as u8;
        let img = image::RgbImage::from_fn(600, 600, |x, y| image::Rgb([noisy(x, y), noisy(y, x), noisy(x + y, y)]));
        let mut bytes = Vec::new();
        DynamicImage::ImageRgb8(img).write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png).expect("png");
        let (jpeg, w, _) = scale(&bytes, 600, 40_000).expect("fits");
        assert!(jpeg.len() <= 40_000 && w < 600, "{} bytes at {w} px", jpeg.len());
        assert!(scale(b"not a picture", 1568, 4_000_000).is_err());
    }

    #[test]
    fn a_picture_over_the_pixel_bound_is_refused_by_its_header() {
        let mut zeros = Vec::new();
        image::GrayImage::new(4097, 4096).write_to(&mut Cursor::new(&mut zeros), image::ImageFormat::Png).expect("png");
        assert!(zeros.len() < 200_000, "small on the wire: {}", zeros.len());
        let refused = scale(&zeros, 1024, 400_000).expect_err("refused");
        assert!(refused.contains("4097 x 4096") && refused.contains("16.8 million"), "{refused}");
        let mut fits = Vec::new();
        image::GrayImage::new(4096, 4096).write_to(&mut Cursor::new(&mut fits), image::ImageFormat::Png).expect("png");
        assert_eq!(scale(&fits, 1024, 400_000).expect("at the bound").1, 1024);
    }
}

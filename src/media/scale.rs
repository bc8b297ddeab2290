//! Scaling a picture for a model: decoded with bounds (a small file that decodes to a
//! huge image is refused, not allocated), shrunk to at most `max_px` on its long side,
//! and encoded as a JPEG of at most `max_bytes` (lower quality first, then smaller).

use std::io::Cursor;

use image::imageops::FilterType;
use image::{DynamicImage, GenericImageView, ImageReader};

/// Widest or tallest picture decoded at all, in pixels.
const MAX_DECODED_PX: u32 = 16_384;
/// Memory a decode may take at most.
const MAX_DECODE_BYTES: u64 = 512 * 1024 * 1024;
/// JPEG qualities tried, best first.
const QUALITIES: [u8; 3] = [85, 70, 50];

/// `bytes` (any of JPEG, PNG, GIF, WebP) as a JPEG within the bounds, with its size.
pub fn scale(bytes: &[u8], max_px: u32, max_bytes: usize) -> Result<(Vec<u8>, u32, u32), String> {
    let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| e.to_string())?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_DECODED_PX);
    limits.max_image_height = Some(MAX_DECODED_PX);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| format!("not a picture richbot can read: {e}"))?;
    let mut side = max_px.max(16);
    loop {
        let (w, h) = decoded.dimensions();
        let fitted = if w.max(h) > side { decoded.resize(side, side, FilterType::Triangle) } else { decoded.clone() };
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
    }
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
}

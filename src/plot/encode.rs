//! PNG files from the bitmap backend's RGB buffer, written with the `png` crate (plotters'
//! own encoder would bring in the whole `image` crate for this one format).

/// `rgb` (3 bytes per pixel, row after row) as a PNG file.
pub fn png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut encoder = ::png::Encoder::new(&mut out, width, height);
    encoder.set_color(::png::ColorType::Rgb);
    encoder.set_depth(::png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(super::error::fail)?;
    writer.write_image_data(rgb).map_err(super::error::fail)?;
    writer.finish().map_err(super::error::fail)?;
    Ok(out)
}

//! The rejections of spec §7 that concern a file as a whole: what kind of file it is, who owns
//! it, and whether its header can be trusted. Each failure is a one-line reason.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

use super::decode::{u16_at, u32_at, u64_at};
use super::layout::{ENDIAN_TAG, MAGIC, VERSION_MAJOR, header};
use super::sections::Sections;

/// Why a file with this metadata (from lstat or fstat) is no channel of ours, if it is not.
/// Root (`euid` 0) may read every user's channel.
pub fn file(meta: &Metadata, euid: u32) -> Result<(), String> {
    let t = meta.file_type();
    let kind = if t.is_symlink() {
        Some("a symlink")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_dir() {
        Some("a directory")
    } else if !t.is_file() {
        Some("not a regular file")
    } else {
        None
    };
    if let Some(kind) = kind {
        return Err(format!("not a regular file: {kind}"));
    }
    if euid != 0 && meta.uid() != euid {
        return Err(format!("owned by uid {}, not by us ({euid})", meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!("mode {mode:04o} gives group/other permissions"));
    }
    if meta.len() < header::SIZE as u64 {
        return Err(format!(
            "truncated: {} bytes, less than the {}-byte header",
            meta.len(),
            header::SIZE
        ));
    }
    Ok(())
}

/// Checks a header read from a file of `size` bytes and returns its section table.
pub fn header(h: &[u8; header::SIZE], size: u64) -> Result<Sections, String> {
    if h[header::MAGIC..header::MAGIC + 8] != MAGIC {
        return Err("wrong magic: not a vramscope channel".into());
    }
    let tag = u32_at(h, header::ENDIAN);
    if tag == ENDIAN_TAG.swap_bytes() {
        return Err("wrong endian tag: written big-endian".into());
    }
    if tag != ENDIAN_TAG {
        return Err(format!("wrong endian tag {tag:#010x}"));
    }
    let major = u16_at(h, header::MAJOR);
    if major != VERSION_MAJOR {
        return Err(format!(
            "major version {major}, this reader knows {VERSION_MAJOR}"
        ));
    }
    let header_size = u64::from(u32_at(h, header::HEADER_SIZE));
    if header_size < header::SIZE as u64 || header_size > size {
        return Err(format!(
            "header size {header_size} is below {} or beyond the file's {size} bytes",
            header::SIZE
        ));
    }
    let file_size = u64_at(h, header::FILE_SIZE);
    if file_size != size {
        return Err(size_changed(file_size, size));
    }
    Sections::decode(h, size)
}

/// The reason for a file whose size is not the header's `file_size`.
pub fn size_changed(expected: u64, actual: u64) -> String {
    let how = if actual < expected {
        "truncated"
    } else {
        "grown"
    };
    format!("{how}: {actual} bytes, the header says {expected}")
}

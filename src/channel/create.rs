//! Making a channel file (§1) so that no reader ever sees it half-written: a dot-named
//! temporary file, space reserved up front, the lock taken, every fixed field written with the
//! magic last, and only then the final name.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{Ordering, fence};

use super::config::WriterConfig;
use super::dir::{DirHandle, open_writer_dir, writer_dir};
use super::layout::{
    ABSENT, ENDIAN_TAG, EXTENSION, FILE_MODE, MAGIC, TEMP_EXTENSION, VERSION_MAJOR, VERSION_MINOR,
    header, state, status,
};
use super::mapping::Mapping;
use super::sections::Sections;
use super::sys::{self, check};
use super::text::fit;

/// A freshly published channel, ready to write to.
pub struct Created {
    pub map: Mapping,
    /// Holds the writer's exclusive flock; the caller closes it.
    pub fd: RawFd,
    /// Device and inode, to check the name still refers to our file before unlinking it.
    pub dev_ino: (u64, u64),
    pub dir: DirHandle,
    pub name: CString,
    pub path: PathBuf,
    pub sections: Sections,
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

/// Creates, fills and publishes the channel for `config`. On failure nothing is left behind.
pub fn create(config: &WriterConfig) -> io::Result<Created> {
    let (sections, file_size) = Sections::plan(config.capacities)
        .ok_or_else(|| invalid("capacities outside the limits of spec §2.2"))?;
    let uid = sys::euid();
    let dir_path = match &config.dir {
        Some(d) => d.clone(),
        None => writer_dir(uid)?,
    };
    let dir = open_writer_dir(&dir_path, uid)?;
    let pid = sys::pid();
    let starttime = sys::starttime(None)?;
    let stem = format!("{pid}-{starttime}");
    let tmp = CString::new(format!(".{stem}.{TEMP_EXTENSION}")).map_err(|_| invalid("name"))?;
    let name = CString::new(format!("{stem}.{EXTENSION}")).map_err(|_| invalid("name"))?;

    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `tmp` is a valid C string, the directory descriptor is open.
    let fd = check(unsafe { libc::openat(dir.fd.as_raw_fd(), tmp.as_ptr(), flags, FILE_MODE) })?;
    let unlink_tmp = || {
        // SAFETY: removes the temporary name we created in our directory.
        unsafe { libc::unlinkat(dir.fd.as_raw_fd(), tmp.as_ptr(), 0) };
    };
    let fill = || -> io::Result<(Mapping, (u64, u64))> {
        let size = libc::off_t::try_from(file_size).map_err(|_| invalid("file too large"))?;
        // SAFETY: fd is our open file. Reserving the space now turns a full /dev/shm into an
        // error here instead of a SIGBUS on some later store.
        let rc = unsafe { libc::posix_fallocate(fd, 0, size) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SAFETY: fd is our open file; the lock lives as long as the descriptor (liveness, §6).
        check(unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) })?;
        // SAFETY: zeroed is a valid bit pattern for the plain C struct `stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open and `st` is writable.
        check(unsafe { libc::fstat(fd, &mut st) })?;
        let map = Mapping::new(fd, file_size as usize)?;
        write_fixed(&map, config, &sections, file_size, pid, starttime, uid);
        Ok((map, (st.st_dev, st.st_ino)))
    };
    let (map, dev_ino) = match fill() {
        Ok(v) => v,
        Err(e) => {
            unlink_tmp();
            // SAFETY: closing the descriptor we opened; nothing else uses it.
            unsafe { libc::close(fd) };
            return Err(e);
        }
    };
    // A hard link fails with EEXIST where rename would silently replace a live channel (two
    // writers in one process): the final name appears atomically or not at all.
    let dirfd = dir.fd.as_raw_fd();
    // SAFETY: both names are valid C strings relative to our directory descriptor.
    let linked = check(unsafe { libc::linkat(dirfd, tmp.as_ptr(), dirfd, name.as_ptr(), 0) });
    unlink_tmp();
    if let Err(e) = linked {
        drop(map);
        // SAFETY: as above.
        unsafe { libc::close(fd) };
        return Err(if e.raw_os_error() == Some(libc::EEXIST) {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                "this process already has a channel in that directory",
            )
        } else {
            e
        });
    }
    map.store(header::STATE, state::RUNNING, Ordering::Release);
    let path = dir.path.join(stem + "." + EXTENSION);
    Ok(Created {
        map,
        fd,
        dev_ino,
        dir,
        name,
        path,
        sections,
    })
}

/// Everything written once, before the file gets its name; the magic last.
fn write_fixed(
    map: &Mapping,
    config: &WriterConfig,
    sections: &Sections,
    file_size: u64,
    pid: u32,
    starttime: u64,
    uid: u32,
) {
    let r = Ordering::Relaxed;
    let pair = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    let rank = |v: Option<i32>| v.unwrap_or(header::NOT_DISTRIBUTED) as u32;
    map.store(
        header::ENDIAN,
        pair(ENDIAN_TAG, pair16(VERSION_MAJOR, VERSION_MINOR)),
        r,
    );
    map.store(
        header::HEADER_SIZE,
        pair(header::SIZE as u32, config.flags),
        r,
    );
    map.store(header::FILE_SIZE, file_size, r);
    map.store(header::STATE, state::STARTING, r);
    let now = sys::monotonic_ns();
    map.store(header::HEARTBEAT, now, r);
    map.store(header::PID, u64::from(pid), r);
    map.store(header::STARTTIME, starttime, r);
    map.store(header::PID_NS, sys::pid_ns_inode(None).unwrap_or(ABSENT), r);
    map.store(header::UID, u64::from(uid), r);
    map.store(header::CREATED_REALTIME, sys::realtime_ns(), r);
    map.store(header::CREATED_MONOTONIC, now, r);
    map.store(
        header::WRITER_KIND,
        pair(config.kind.code(), config.sample_period_us),
        r,
    );
    map.store(
        header::RANK,
        pair(rank(config.rank), rank(config.local_rank)),
        r,
    );
    map.store(header::WORLD_SIZE, pair(rank(config.world_size), 0), r);
    let texts = [
        (header::JOB_ID, header::JOB_ID_LEN, &config.job_id),
        (header::FRAMEWORK, header::FRAMEWORK_LEN, &config.framework),
        (header::CMDLINE, header::CMDLINE_LEN, &config.cmdline),
        (
            header::ALLOCATOR_CONFIG,
            header::ALLOCATOR_CONFIG_LEN,
            &config.allocator_config,
        ),
    ];
    for (off, len, text) in texts {
        map.store_text(off, len, fit(text, len));
    }
    let table = sections.encode();
    map.store_text(header::SECTION_TABLE, table.len(), &table);
    map.store(status::OFFSET + status::STEP, ABSENT, r);
    // Readers check the magic first: everything above must be visible before it.
    fence(Ordering::Release);
    map.store(header::MAGIC, u64::from_le_bytes(MAGIC), Ordering::Release);
}

fn pair16(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | (u32::from(hi) << 16)
}

//! What an idle loom keeps resident.
//!
//! Start-up touches code all over the binary: the engine session registers every built-in
//! function and the plan guard's self-test plans each refused statement (SPEC §9). The kernel
//! maps those file pages into loom and counts them in its RSS for as long as they stay mapped,
//! although an idle gateway never runs that code again: measured on the release binary, 60 MiB
//! of a 66 MiB RSS were such file-backed pages and 6 MiB were loom's own memory
//! (benches/README.md, issue 17).
//!
//! Once start-up is over, loom asks the kernel to reclaim the pages of its own read-only
//! mappings (`MADV_PAGEOUT`). They are clean copies of the executable: nothing is lost, and
//! code that runs again is faulted back in from the page cache (or the file) on first use.
//! Writable mappings are never touched, nor read-only ones that hold anonymous pages (the
//! relocated `.data.rel.ro`: hot data that would go to swap).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Release the resident pages of the executable's read-only and code mappings. Returns the
/// bytes of mappings advised (0 where the platform has no such advice).
pub fn release_start_up_pages() -> usize {
    imp::release()
}

/// Heavy work (the engine, parsing a large result) done so far, counted by [`heavy_work`].
static HEAVY_WORK: AtomicU64 = AtomicU64::new(0);

/// Heavy work ran: its code pages will be handed back once loom is idle again.
pub fn heavy_work() {
    HEAVY_WORK.fetch_add(1, Ordering::Relaxed);
}

/// How long heavy work must have stopped before its pages are handed back.
pub const IDLE_AFTER_HEAVY_WORK: Duration = Duration::from_secs(10);

/// Release the start-up pages after `first`, then keep watching: each time heavy work ran and
/// none followed for a whole [`IDLE_AFTER_HEAVY_WORK`], release again. A query's code pages
/// (most of the engine) are then not held for the rest of an idle session. Runs forever; call
/// it on a thread of its own.
pub fn keep_idle_footprint_small(first: Duration) -> ! {
    std::thread::sleep(first);
    let advised = release_start_up_pages();
    tracing::debug!(
        "released the start-up pages of {} MiB of mappings",
        advised >> 20
    );
    let mut released_at = HEAVY_WORK.load(Ordering::Relaxed);
    let mut previous = released_at;
    loop {
        std::thread::sleep(IDLE_AFTER_HEAVY_WORK);
        let now = HEAVY_WORK.load(Ordering::Relaxed);
        // Work happened since the last release, and none during the last whole period.
        if now != released_at && now == previous {
            release_start_up_pages();
            released_at = now;
        }
        previous = now;
    }
}

#[cfg(target_os = "linux")]
mod imp {
    pub(super) fn release() -> usize {
        let Ok(exe) = std::env::current_exe() else {
            return 0;
        };
        // smaps rather than maps: it says which mappings hold anonymous pages.
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let exe = exe.to_string_lossy();
        let mut advised = 0;
        for (start, len) in file_only_mappings_of(&smaps, &exe) {
            // SAFETY: `start..start+len` is a whole mapping of this process as the kernel
            // listed it. MADV_PAGEOUT only reclaims pages and keeps their content (clean file
            // pages are re-read when touched), so no memory changes meaning; the mapping is
            // not writable, so no store can race with it.
            #[allow(unsafe_code)]
            let done =
                unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
            if done == 0 {
                advised += len;
            }
        }
        advised
    }

    /// The read-only mappings of `exe` in `smaps` that hold no anonymous pages. A mapping with
    /// anonymous pages (the relocated `.data.rel.ro`) is left alone: with swap on, paging it
    /// out would swap out hot data (vtables) and cost a disk read on next use.
    fn file_only_mappings_of(smaps: &str, exe: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        let mut current: Option<(usize, usize)> = None;
        let mut anonymous = false;
        let mut close = |current: Option<(usize, usize)>, anonymous: bool| {
            if let (Some(mapping), false) = (current, anonymous) {
                found.push(mapping);
            }
        };
        for line in smaps.lines() {
            if let Some(kib) = line.strip_prefix("Anonymous:") {
                anonymous |= kib.trim().trim_end_matches("kB").trim() != "0";
            } else if is_mapping_header(line) {
                close(current.take(), anonymous);
                current = read_only_mapping_of(line, exe);
                anonymous = false;
            }
        }
        close(current, anonymous);
        found
    }

    /// A mapping's first line in smaps starts with its address range (`start-end`, hex);
    /// the lines of fields under it start with a name and a colon.
    fn is_mapping_header(line: &str) -> bool {
        line.split(' ')
            .next()
            .and_then(|range| range.split_once('-'))
            .is_some_and(|(a, b)| {
                !a.is_empty()
                    && a.bytes().all(|c| c.is_ascii_hexdigit())
                    && b.bytes().all(|c| c.is_ascii_hexdigit())
            })
    }

    /// `(start, length)` of a `/proc/self/maps` line that maps `exe` without write permission.
    fn read_only_mapping_of(line: &str, exe: &str) -> Option<(usize, usize)> {
        // address perms offset device inode path: single spaces, then padding before the path
        // (which may itself hold spaces).
        let mut fields = line.splitn(6, ' ');
        let range = fields.next()?;
        let perms = fields.next()?;
        let path = fields.nth(3)?.trim_start();
        if path != exe || perms.contains('w') || path.ends_with(" (deleted)") {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        (end > start).then(|| (start, end - start))
    }

    #[cfg(test)]
    mod tests {
        use super::{file_only_mappings_of, read_only_mapping_of};

        #[test]
        fn mappings_with_anonymous_pages_are_left_alone() {
            let exe = "/usr/bin/loom";
            let smaps = "\
1000-3000 r--p 00000000 fd:01 1234      /usr/bin/loom
Rss:                   8 kB
Anonymous:             0 kB
3000-5000 r-xp 00002000 fd:01 1234      /usr/bin/loom
Anonymous:             0 kB
5000-6000 r--p 00004000 fd:01 1234      /usr/bin/loom
Anonymous:             4 kB
6000-7000 rw-p 00005000 fd:01 1234      /usr/bin/loom
Anonymous:             0 kB
7000-8000 r-xp 00000000 fd:01 99        /usr/lib/libc.so.6
Anonymous:             0 kB
";
            assert_eq!(
                file_only_mappings_of(smaps, exe),
                vec![(0x1000, 0x2000), (0x3000, 0x2000)]
            );
        }

        #[test]
        fn only_read_only_mappings_of_the_executable_are_picked() {
            let exe = "/usr/bin/loom";
            let line = |perms: &str, path: &str| {
                format!("55edb306b000-55edb306d000 {perms} 00000000 fd:01 1234      {path}")
            };
            assert_eq!(
                read_only_mapping_of(&line("r-xp", exe), exe),
                Some((0x55ed_b306_b000, 0x2000))
            );
            assert!(read_only_mapping_of(&line("r--p", exe), exe).is_some());
            assert_eq!(read_only_mapping_of(&line("rw-p", exe), exe), None);
            assert_eq!(
                read_only_mapping_of(&line("r-xp", "/usr/lib/libc.so.6"), exe),
                None
            );
            assert_eq!(
                read_only_mapping_of(&format!("{} (deleted)", line("r-xp", exe)), exe),
                None
            );
            assert_eq!(
                read_only_mapping_of("7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]", exe),
                None
            );
            let spaced = "/opt/my tools/loom";
            assert!(read_only_mapping_of(&line("r-xp", spaced), spaced).is_some());
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub fn release() -> usize {
        0
    }
}

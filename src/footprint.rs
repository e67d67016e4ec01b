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
//! Writable mappings are never touched, and a relocated read-only page is anonymous memory
//! whose content `MADV_PAGEOUT` preserves (it is swapped, or left alone without swap).

/// Release the resident pages of the executable's read-only and code mappings. Returns the
/// bytes of mappings advised (0 where the platform has no such advice).
pub fn release_start_up_pages() -> usize {
    imp::release()
}

#[cfg(target_os = "linux")]
mod imp {
    pub fn release() -> usize {
        let Ok(exe) = std::env::current_exe() else {
            return 0;
        };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return 0;
        };
        let exe = exe.to_string_lossy();
        let mut advised = 0;
        for line in maps.lines() {
            if let Some((start, len)) = read_only_mapping_of(line, &exe) {
                // SAFETY: `start..start+len` is a whole mapping of this process as the kernel
                // listed it. MADV_PAGEOUT only reclaims pages and keeps their content (file
                // pages are re-read, anonymous ones swapped or kept), so no memory changes
                // meaning; the mapping is not writable, so no store can race with it.
                let done =
                    unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
                if done == 0 {
                    advised += len;
                }
            }
        }
        advised
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
        use super::read_only_mapping_of;

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

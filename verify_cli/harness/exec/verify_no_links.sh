# Run the tests' command with no symbolic link followed in the folders it shares with the
# candidate: `sh verify_no_links.sh FOLDER... -- COMMAND ARGS...` (the cold two-process runs of
# bwrap and docker nodes put it in front of the run's command; warm runs remount in the worker,
# harness/warm/warm_worker.py refuse_links).
#
# The candidate writes the work folder and /tmp too, and a link it plants there (its "output
# file" pointing at a test's golden file or a hidden test) would otherwise be resolved in the
# tests' view, where those files exist: the tests would read their own expected data as the
# candidate's answer. In a user and mount namespace of its own (the uid and gid mapped to
# themselves), each FOLDER becomes a mount of its own (a recursive bind onto itself, so that the
# test folders and any runtime bound under it keep their own mounts) marked nosymfollow, its
# other flags kept; then COMMAND replaces this process, which drops that namespace's
# capabilities (execve as a uid other than 0). Opening such a link in the tests' view fails
# (ELOOP); readlink still works. The candidate's own view is another mount and follows links as
# before.
#
# Perl (perl-base is in every Debian image, with or without Python) makes the system calls:
# mount(8) refuses a user other than root, whatever the namespace. Without perl, Python does.
if ! command -v perl >/dev/null 2>&1 || [ "${VERIFY_NO_LINKS_PYTHON:-}" = 1 ]; then
  exec python3 -I -S -c '
import ctypes, os, sys
args = sys.argv[1:]
cut = args.index("--") if "--" in args else len(args)
folders, command = args[:cut], args[cut + 1:]
if not command:
    sys.exit("usage: verify_no_links.sh FOLDER... -- COMMAND [ARGS...]")
libc = ctypes.CDLL(None, use_errno=True)
def check(rc, what):
    if rc != 0:
        sys.exit(f"verify_no_links: {what}: {os.strerror(ctypes.get_errno())}")
uid, gid = os.getuid(), os.getgid()
check(libc.unshare(0x10000000 | 0x00020000), "unshare")
for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
    with open(f"/proc/self/{name}", "w") as fh:
        fh.write(text)
check(libc.mount(b"none", b"/", None, ctypes.c_ulong(16384 | (1 << 18)), None), "private /")
kept = ((os.ST_RDONLY, 1), (os.ST_NOSUID, 2), (os.ST_NODEV, 4), (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024),
        (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))
for folder in folders:
    path = folder.encode()
    check(libc.mount(path, path, None, ctypes.c_ulong(4096 | 16384), None), f"bind {folder}")
    flags = 32 | 4096 | 256
    current = os.statvfs(folder).f_flag
    for st, ms in kept:
        if current & st:
            flags |= ms
    check(libc.mount(b"none", path, None, ctypes.c_ulong(flags), None), f"cannot mark {folder} nosymfollow")
os.execvp(command[0], command)
' "$@"
fi
exec perl -e '
use strict;
use warnings;
use POSIX ();
my %calls = (x86_64 => [272, 165], aarch64 => [97, 40]);   # unshare, mount
my $nr = $calls{(POSIX::uname())[4]} or die "verify_no_links: no system call numbers for this machine\n";
my ($unshare, $mount) = @$nr;
my (@folders, @command);
while (@ARGV) { my $a = shift @ARGV; if ($a eq "--") { @command = @ARGV; last } push @folders, $a }
die "usage: verify_no_links.sh FOLDER... -- COMMAND [ARGS...]\n" unless @command;
my ($uid, $gid) = ($<, (split " ", $()[0]);
sub put { my ($path, $text) = @_; open(my $fh, ">", $path) or die "verify_no_links: $path: $!\n"; print $fh $text; close($fh) or die "verify_no_links: $path: $!\n" }
syscall($unshare, 0x10000000 | 0x00020000) == 0 or die "verify_no_links: unshare: $!\n";
put("/proc/self/uid_map", "$uid $uid 1");
put("/proc/self/setgroups", "deny");
put("/proc/self/gid_map", "$gid $gid 1");
my $none = "none";
my $root = "/";
syscall($mount, $none, $root, 0, 16384 | (1 << 18), 0) == 0 or die "verify_no_links: private /: $!\n";
my %flag = (ro => 1, nosuid => 2, nodev => 4, noexec => 8, noatime => 1024, nodiratime => 2048,
            relatime => 1 << 21, strictatime => 1 << 24);
for my $dir (@folders) {
  syscall($mount, $dir, $dir, 0, 4096 | 16384, 0) == 0 or die "verify_no_links: bind $dir: $!\n";
  my $kept = 0;
  open(my $info, "<", "/proc/self/mountinfo") or die "verify_no_links: mountinfo: $!\n";
  while (my $line = <$info>) {
    my @f = split " ", $line;
    next unless $f[4] eq $dir;
    $kept = 0;
    for my $o (split ",", $f[5]) { $kept |= $flag{$o} // 0 }   # the last (topmost) mount wins
  }
  close($info);
  syscall($mount, $none, $dir, 0, 32 | 4096 | 256 | $kept, 0) == 0
    or die "verify_no_links: cannot mark $dir nosymfollow in the tests view: $!\n";
}
exec { $command[0] } @command or die "verify_no_links: $command[0]: $!\n";
' -- "$@"

package quota

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
)

const (
	testUID = 54321
	testGID = 54322
	mib     = 1 << 20
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("quota tests need root (mount, loop devices)")
	}
	if err := Available(); err != nil {
		t.Skipf("quotas unavailable on this host: %v", err)
	}
}

// testConfig returns a config under a fresh temporary directory that the
// sandbox uid can traverse, and destroys the volume when the test ends
// (registered after t.TempDir, so it runs before the directory is removed).
func testConfig(t *testing.T, size int64) Config {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := Config{
		Image:      filepath.Join(dir, "images", "sb.img"),
		Mountpoint: filepath.Join(dir, "mnt"),
		SizeBytes:  size,
		UID:        testUID,
		GID:        testGID,
	}
	t.Cleanup(func() {
		v, err := newVolume(c)
		if err != nil {
			t.Error(err)
			return
		}
		if err := v.Destroy(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return c
}

// asSandbox runs a command as the sandbox uid/gid and returns its combined
// output.
func asSandbox(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: testUID, Gid: testGID, Groups: []uint32{}},
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mountsAt returns the mounts at dir, lowest first.
func mountsAt(t *testing.T, dir string) []*mountinfo.Info {
	t.Helper()
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != dir, false
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func mountCount(t *testing.T, dir string) int {
	t.Helper()
	return len(mountsAt(t, dir))
}

// mountOptions returns the per-mount options of the lowest mount at dir.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	if ms := mountsAt(t, dir); len(ms) > 0 {
		return ms[0].Options
	}
	return ""
}

func loopsOf(t *testing.T, image string) string {
	t.Helper()
	out, err := exec.Command("losetup", "-j", image).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup -j %s: %v: %s", image, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestAvailable(t *testing.T) {
	if os.Geteuid() != 0 {
		err := Available()
		if err == nil || !strings.Contains(err.Error(), "root") {
			t.Fatalf("Available as non-root = %v, want an error about root", err)
		}
		return
	}
	if err := Available(); err != nil {
		t.Fatalf("Available: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 1*mib)
	if _, err := Mount(ctx, c); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("Mount with 1 MiB = %v, want minimum-size error", err)
	}
	c.SizeBytes = 0
	if _, err := Mount(ctx, c); err == nil || !strings.Contains(err.Error(), "no size") {
		t.Errorf("Mount with no size and no image = %v, want error", err)
	}
	if _, err := Mount(ctx, Config{Image: c.Image}); err == nil {
		t.Error("Mount without mountpoint succeeded")
	}
	if _, err := os.Stat(c.Image); !os.IsNotExist(err) {
		t.Errorf("failed Mount left an image behind: %v", err)
	}
}

func TestMountQuota(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}

	// Owner and mode of home and tmp.
	for _, p := range []string{v.Home(), v.Tmp()} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 || fi.Mode()&(os.ModeSticky|os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s: mode %v, want directory 0700", p, fi.Mode())
		}
		if st.Uid != testUID || st.Gid != testGID {
			t.Errorf("%s: owner %d:%d, want %d:%d", p, st.Uid, st.Gid, testUID, testGID)
		}
	}
	if v.Home() != filepath.Join(c.Mountpoint, "home") || v.Tmp() != filepath.Join(c.Mountpoint, "tmp") {
		t.Errorf("Home, Tmp = %s, %s", v.Home(), v.Tmp())
	}
	// lost+found stays root-only; the root of the volume is not writable
	// by the sandbox.
	if fi, err := os.Stat(filepath.Join(c.Mountpoint, "lost+found")); err != nil {
		t.Error(err)
	} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o700 {
		t.Errorf("lost+found: owner %d mode %v, want root 0700", st.Uid, fi.Mode())
	}
	if out, err := asSandbox(t, "dd", "if=/dev/zero", "of="+filepath.Join(c.Mountpoint, "x"), "bs=1k", "count=1"); err == nil {
		t.Errorf("sandbox could write to the root of the volume: %s", out)
	}
	if out, err := asSandbox(t, "ls", filepath.Join(c.Mountpoint, "lost+found")); err == nil {
		t.Errorf("sandbox could list lost+found: %s", out)
	}

	// Mount options.
	opts := mountOptions(t, c.Mountpoint)
	for _, o := range []string{"nosuid", "nodev"} {
		if !strings.Contains(","+opts+",", ","+o+",") {
			t.Errorf("mount options %q lack %s", opts, o)
		}
	}

	// Usage reflects written bytes.
	used0, total, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if total <= 12*mib || total > 16*mib {
		t.Errorf("total = %d, want a bit under 16 MiB", total)
	}
	if out, err := asSandbox(t, "dd", "if=/dev/zero", "of="+filepath.Join(v.Home(), "four"), "bs=1M", "count=4", "conv=fsync"); err != nil {
		t.Fatalf("writing 4 MiB as the sandbox: %v: %s", err, out)
	}
	used1, _, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if d := used1 - used0; d < 4*mib || d > 5*mib {
		t.Errorf("usage grew by %d after writing 4 MiB (before %d, after %d)", d, used0, used1)
	}
	t.Logf("usage: %d/%d before, %d after writing 4 MiB", used0, total, used1)

	// Writing more than the quota fails with ENOSPC.
	out, err := asSandbox(t, "dd", "if=/dev/zero", "of="+filepath.Join(v.Tmp(), "big"), "bs=1M", "count=32", "conv=fsync")
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("writing 32 MiB into a 16 MiB quota: err=%v, output %q; want ENOSPC", err, out)
	}
	used2, _, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if used2 < total-mib {
		t.Errorf("usage after filling = %d of %d", used2, total)
	}

	// The host filesystem is unaffected: the image did not grow beyond
	// the quota (its extent tree aside) and nothing was written next to it.
	fi, err := os.Stat(c.Image)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := fi.Sys().(*syscall.Stat_t).Blocks * 512; fi.Size() != 16*mib || alloc > 16*mib+64<<10 {
		t.Errorf("image size %d, allocated %d; want at most 16 MiB", fi.Size(), alloc)
	}
	ents, err := os.ReadDir(filepath.Dir(c.Image))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("image directory holds %d entries, want only the image", len(ents))
	}
	if err := v.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(c.Mountpoint); err != nil || len(ents) != 0 {
		t.Errorf("host mountpoint directory after unmount: %v entries, err %v; want empty", len(ents), err)
	}
	if _, _, err := v.Usage(); err == nil {
		t.Error("Usage of an unmounted volume succeeded")
	}
}

func TestIdempotentAndPersistent(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("persist me\n")
	if out, err := asSandbox(t, "sh", "-c", "printf 'persist me\\n' > "+filepath.Join(v.Home(), "f")); err != nil {
		t.Fatalf("writing as sandbox: %v: %s", err, out)
	}

	// Mount again while mounted: no second mount, no second loop device.
	v2, err := Mount(ctx, c)
	if err != nil {
		t.Fatalf("second Mount: %v", err)
	}
	if n := mountCount(t, c.Mountpoint); n != 1 {
		t.Errorf("%d mounts at the mountpoint after mounting twice, want 1", n)
	}
	if l := loopsOf(t, c.Image); strings.Count(l, "\n") != 0 || l == "" {
		t.Errorf("loop devices after mounting twice: %q, want one", l)
	}

	// Unmount (twice: idempotent), then mount again: the file is still there.
	if err := v2.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Unmount(ctx); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
	if n := mountCount(t, c.Mountpoint); n != 0 {
		t.Errorf("%d mounts after Unmount", n)
	}
	if l := loopsOf(t, c.Image); l != "" {
		t.Errorf("loop devices after Unmount: %q", l)
	}
	if _, err := os.Stat(filepath.Join(c.Mountpoint, "home", "f")); !os.IsNotExist(err) {
		t.Errorf("file visible while unmounted: %v", err)
	}
	v, err = Mount(ctx, c)
	if err != nil {
		t.Fatalf("Mount after Unmount: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(v.Home(), "f"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after remount: %q, %v; want %q", got, err, data)
	}
	fi, err := os.Stat(filepath.Join(v.Home(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != testUID {
		t.Errorf("owner after remount: %d", st.Uid)
	}
}

// TestSpaceInPaths mounts a volume whose paths mountinfo escapes (a space is
// written as \040): Mount must still recognise its own mount (idempotent,
// no second mount) and Unmount must find it.
func TestSpaceInPaths(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	base := filepath.Join(filepath.Dir(c.Mountpoint), "with space")
	c.Image = filepath.Join(base, "sb 1.img")
	c.Mountpoint = filepath.Join(base, "mnt dir")
	t.Cleanup(func() {
		if v, err := newVolume(c); err != nil {
			t.Error(err)
		} else if err := v.Destroy(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if ms := mountsAt(t, c.Mountpoint); len(ms) != 1 || ms[0].FSType != "ext4" {
		t.Fatalf("mounts at %q: %+v, want one ext4 mount", c.Mountpoint, ms)
	}
	if _, _, err := v.Usage(); err != nil {
		t.Errorf("Usage: %v", err)
	}
	if _, err := Mount(ctx, c); err != nil {
		t.Fatalf("second Mount: %v", err)
	}
	if n := mountCount(t, c.Mountpoint); n != 1 {
		t.Errorf("%d mounts at the mountpoint after mounting twice, want 1", n)
	}
	if err := v.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	if n := mountCount(t, c.Mountpoint); n != 0 {
		t.Errorf("%d mounts after Unmount", n)
	}
	if l := loopsOf(t, c.Image); l != "" {
		t.Errorf("loop devices after Unmount: %q", l)
	}
}

// TestConcurrentUnmountDestroy calls Unmount and Destroy of one Volume from
// several goroutines at once: they are serialized, so every call succeeds
// (each is idempotent) and nothing is left behind.
func TestConcurrentUnmountDestroy(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			if i%2 == 0 {
				errs[i] = v.Unmount(ctx)
			} else {
				errs[i] = v.Destroy(ctx)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if n := mountCount(t, c.Mountpoint); n != 0 {
		t.Errorf("%d mounts left", n)
	}
	if _, err := os.Stat(c.Image); !os.IsNotExist(err) {
		t.Errorf("image still exists: %v", err)
	}
	if _, err := os.Stat(c.Mountpoint); !os.IsNotExist(err) {
		t.Errorf("mountpoint still exists: %v", err)
	}
}

func TestDestroy(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Tmp(), "x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Image); !os.IsNotExist(err) {
		t.Errorf("image still exists: %v", err)
	}
	if _, err := os.Stat(c.Mountpoint); !os.IsNotExist(err) {
		t.Errorf("mountpoint still exists: %v", err)
	}
	if n := mountCount(t, c.Mountpoint); n != 0 {
		t.Errorf("%d mounts left", n)
	}
	// losetup -j needs the file to exist; check no loop device is backed
	// by the (deleted) image either.
	out, err := exec.Command("losetup", "-a").CombinedOutput()
	if err != nil {
		t.Fatalf("losetup -a: %v: %s", err, out)
	}
	if strings.Contains(string(out), c.Image) {
		t.Errorf("loop device still attached to the image: %s", out)
	}
	if err := v.Destroy(ctx); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if err := v.Unmount(ctx); err != nil {
		t.Errorf("Unmount after Destroy: %v", err)
	}
}

// TestHostFull: the image's blocks are reserved when it is made, so a host
// filesystem too small for the quota refuses the volume (ENOSPC) and leaves
// nothing behind, and a host filesystem that fills up afterwards does not
// reach into the volume: it still takes its whole quota. A sparse image
// costs only what is written.
func TestHostFull(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 32*mib)
	host := filepath.Dir(c.Image)
	if err := os.MkdirAll(host, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", host).CombinedOutput(); err != nil {
		t.Fatalf("mounting a small host filesystem: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", host).Run() })

	big := c
	big.Image, big.Mountpoint = filepath.Join(host, "big.img"), c.Mountpoint+"-big"
	big.SizeBytes = 64 * mib
	if v, err := Mount(ctx, big); !errors.Is(err, syscall.ENOSPC) {
		if v != nil {
			v.Destroy(ctx)
		}
		t.Fatalf("a 64 MiB quota on a 48 MiB host: err = %v, want ENOSPC", err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Errorf("a refused image left %d files on the host", len(ents))
	}

	sparse := c
	sparse.Image, sparse.Mountpoint, sparse.Sparse = filepath.Join(host, "sparse.img"), c.Mountpoint+"-sparse", true
	vs, err := Mount(ctx, sparse)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Destroy(ctx)
	if fi, err := os.Stat(sparse.Image); err != nil {
		t.Fatal(err)
	} else if alloc := fi.Sys().(*syscall.Stat_t).Blocks * 512; alloc > 8*mib {
		t.Errorf("a sparse 32 MiB image takes %d bytes of the host", alloc)
	}
	if err := vs.Unmount(ctx); err != nil {
		t.Fatal(err)
	}

	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(c.Image); err != nil {
		t.Fatal(err)
	} else if alloc := fi.Sys().(*syscall.Stat_t).Blocks * 512; alloc < 32*mib {
		t.Errorf("the image reserves %d bytes of the host, want its 32 MiB", alloc)
	}
	// Fill the host, then the volume: the volume still takes its quota.
	filler := filepath.Join(host, "filler")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=64").CombinedOutput(); err == nil {
		t.Fatalf("filling the host: expected it to run out: %s", out)
	}
	out, err := asSandbox(t, "dd", "if=/dev/zero", "of="+filepath.Join(v.Home(), "fill"), "bs=1M", "count=24", "conv=fsync")
	if err != nil {
		t.Fatalf("writing 24 MiB into a 32 MiB quota on a full host: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(v.Tmp(), "after"), []byte("still writable"), 0o600); err != nil {
		t.Errorf("the volume is not writable after the host filled: %v", err)
	}
	_, total32, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	// Reused on a full host: the reservation is already there. A larger
	// quota the host has no room for leaves the image at its size: growing
	// it unreserved would let a full host turn it read-only.
	grown := c
	grown.SizeBytes = 40 * mib
	if v, err = Mount(ctx, grown); err != nil {
		t.Fatalf("re-mounting a reserved image on a full host: %v", err)
	}
	if _, total, err := v.Usage(); err != nil || total != total32 {
		t.Errorf("a volume grown on a full host: %d bytes, %v; want it kept at %d", total, err, total32)
	}
	if fi, err := os.Stat(c.Image); err != nil || fi.Size() != 32*mib {
		t.Errorf("its image: %v, want it kept at 32 MiB", err)
	}
	if b, err := os.ReadFile(filepath.Join(v.Tmp(), "after")); err != nil || string(b) != "still writable" {
		t.Errorf("after re-mounting: %q, %v", b, err)
	}
	// A sparse image the full host cannot reserve is mounted as it is,
	// rather than hiding its files.
	sparse.Sparse = false
	if vs, err = Mount(ctx, sparse); err != nil {
		t.Errorf("re-mounting an unreserved image on a full host: %v", err)
	}
	if err := v.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestGrow(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	_, total16, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Home(), "keep"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Grow while mounted (Mount is idempotent, and grows online). Online
	// resizing needs CAP_SYS_RESOURCE, which a container may lack; then
	// Mount fails, the image is left as it was, and an Unmount+Mount grows
	// it offline.
	c.SizeBytes = 32 * mib
	v2, err := Mount(ctx, c)
	if err != nil {
		if !strings.Contains(err.Error(), "CAP_SYS_RESOURCE") {
			t.Fatal(err)
		}
		t.Logf("online growth failed (no CAP_SYS_RESOURCE here?): %v", err)
		if fi, err := os.Stat(c.Image); err != nil || fi.Size() != 16*mib {
			t.Fatalf("image not rolled back after failed online growth: %v, %v", fi.Size(), err)
		}
		if _, total, err := v.Usage(); err != nil || total != total16 {
			t.Fatalf("volume changed after failed online growth: %d, %v", total, err)
		}
		if err := v.Unmount(ctx); err != nil {
			t.Fatal(err)
		}
		if v2, err = Mount(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	v = v2
	_, total32, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if total32 < total16+14*mib {
		t.Errorf("total after growing to 32 MiB: %d (was %d)", total32, total16)
	}

	// Grow while unmounted; a smaller size is ignored.
	if err := v.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	c.SizeBytes = 48 * mib
	if v, err = Mount(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := v.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	c.SizeBytes = 8 * mib
	if v, err = Mount(ctx, c); err != nil {
		t.Fatal(err)
	}
	_, total48, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if total48 < total32+14*mib {
		t.Errorf("total after growing to 48 MiB: %d (was %d)", total48, total32)
	}
	if _, err := os.Stat(filepath.Join(v.Home(), "keep")); err != nil {
		t.Errorf("file lost while growing: %v", err)
	}
	t.Logf("usable bytes: %d at 16 MiB, %d at 32 MiB, %d at 48 MiB", total16, total32, total48)
}

func TestMountpointTaken(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	if err := os.MkdirAll(c.Mountpoint, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", c.Mountpoint).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	defer exec.Command("umount", c.Mountpoint).Run()
	_, err := Mount(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "mounted on it") {
		t.Fatalf("Mount over a tmpfs = %v, want an error", err)
	}
	v, _ := newVolume(c)
	if err := v.Unmount(ctx); err == nil {
		t.Error("Unmount unmounted someone else's filesystem")
	}
}

func TestLazyUnmount(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	c := testConfig(t, 16*mib)
	v, err := Mount(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(v.Tmp(), "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := v.Unmount(ctx); err != nil {
		t.Fatalf("Unmount of a busy volume: %v", err)
	}
	if n := mountCount(t, c.Mountpoint); n != 0 {
		t.Errorf("%d mounts after lazy unmount", n)
	}
	// The filesystem is still alive through f: mounting it again must be
	// refused.
	if _, err := Mount(ctx, c); err == nil || !strings.Contains(err.Error(), "still in use") {
		t.Fatalf("Mount while lazily unmounted and busy = %v, want in-use error", err)
	}
	if _, err := f.WriteString("still writable"); err != nil {
		t.Errorf("writing to the open file: %v", err)
	}
	f.Close()
	// The loop device goes away with its last user.
	deadline := time.Now().Add(10 * time.Second)
	for loopsOf(t, c.Image) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("loop device still attached: %s", loopsOf(t, c.Image))
		}
		time.Sleep(50 * time.Millisecond)
	}
	v, err = Mount(ctx, c)
	if err != nil {
		t.Fatalf("Mount after the last user went away: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(v.Tmp(), "open"))
	if err != nil || string(got) != "still writable" {
		t.Errorf("file written after lazy unmount: %q, %v", got, err)
	}
}

func TestTiming(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	for _, size := range []int64{16 * mib, 1 << 30} {
		c := testConfig(t, size)
		start := time.Now()
		v, err := Mount(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		create := time.Since(start)
		start = time.Now()
		if err := v.Unmount(ctx); err != nil {
			t.Fatal(err)
		}
		unmount := time.Since(start)
		start = time.Now()
		if v, err = Mount(ctx, c); err != nil {
			t.Fatal(err)
		}
		remount := time.Since(start)
		fi, err := os.Stat(c.Image)
		if err != nil {
			t.Fatal(err)
		}
		_, total, err := v.Usage()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%4d MiB: create+mount %v, unmount %v, fsck+mount existing %v; image allocates %d KiB on the host; usable %d KiB",
			size/mib, create.Round(time.Millisecond), unmount.Round(time.Millisecond), remount.Round(time.Millisecond),
			fi.Sys().(*syscall.Stat_t).Blocks/2, total/1024)
	}
}

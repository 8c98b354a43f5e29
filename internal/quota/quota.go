// Package quota gives a sandbox a hard disk quota on its writable
// directories (home and /tmp, which bubblewrap binds into the jail).
//
// It owns, per sandbox, one image file and one mountpoint directory. The
// image is a file holding an ext4 filesystem; Mount loop-mounts it
// (nosuid,nodev) on the mountpoint and makes sure it contains the two
// directories the sandbox gets:
//
//	<mountpoint>/home  owner UID:GID, mode 0700
//	<mountpoint>/tmp   owner UID:GID, mode 0700 (not 01777: only this
//	                   sandbox's uid ever uses it)
//
// The root of the filesystem stays root-owned 0755 and the lost+found
// directory that mkfs creates is left in place, root-owned 0700: the
// sandbox only ever sees home and tmp (bind-mounted), never the root of
// the volume, so lost+found is invisible to it, and e2fsck wants it there.
//
// Why an image file rather than filesystem quotas: it works on any host
// filesystem (ext4, xfs, btrfs, overlayfs in a container, ...) without
// usrquota/prjquota mount options or project-quota support, the limit is
// enforced by the kernel as a plain "No space left on device" inside the
// sandbox, a full sandbox never fills the host filesystem, and deleting a
// sandbox's data is deleting one file. The image's blocks are reserved on
// the host (fallocate, no data written), so that a full host disk can never
// turn a sandbox's filesystem read-only under it (see Config.Sparse).
//
// The filesystem keeps its ext4 journal, so an image survives a host crash
// and is reused intact; on reuse an unmounted image is checked with
// "e2fsck -p" (milliseconds on a clean filesystem) before it is mounted. The
// journal and metadata make the usable space somewhat smaller than SizeBytes
// (about 1 MiB of 16 MiB, about 32 MiB of 1 GiB).
//
// Limits: it needs root (mount, mkfs), loop devices (/dev/loop-control) and
// the e2fsprogs and util-linux programs mkfs.ext4, e2fsck, resize2fs,
// dumpe2fs, mount, umount and losetup; Available reports what is missing.
// The image file and the mountpoint must not be reachable from inside the
// sandbox. Growing a reused image (larger SizeBytes) is supported: offline
// (e2fsck -f, resize2fs on the image) when Mount finds it unmounted, online
// when it is already mounted, which additionally needs CAP_SYS_RESOURCE.
// Shrinking is not supported: a smaller SizeBytes on reuse is ignored and
// the image keeps its size. A given image must be managed by one process at
// a time and, within it, by one Volume at a time (see Mount); Unmount and
// Destroy on one Volume are serialized.
package quota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// MinSizeBytes is the smallest quota accepted when an image is created;
// smaller ext4 filesystems would have no room for a journal.
const MinSizeBytes = 4 << 20

// Config describes one sandbox's quota volume.
type Config struct {
	Image      string // path of the image file (created if missing, reused if present)
	Mountpoint string // directory to mount it on (created if missing)
	// SizeBytes is the quota. When an existing image is reused with a
	// larger size it is grown with resize2fs (see the package comment); a
	// smaller size is ignored. Zero means "keep the existing image's size"
	// and is an error if the image does not exist yet.
	SizeBytes int64
	UID, GID  int // owner of the home and tmp directories
	// Sparse leaves the image's blocks unreserved: it costs host space only
	// as it is written, but the host filesystem may then fill up under it,
	// and a write the loop device cannot store is an I/O error after which
	// ext4 aborts its journal and turns read-only. By default every block
	// is reserved with fallocate(2) when the image is created, grown or
	// reused, so that a full host disk is an error there (wrapping
	// syscall.ENOSPC; EOPNOTSUPP where the host filesystem cannot reserve)
	// and never inside a running sandbox. A reused image the host has no
	// room to reserve is mounted unreserved, and one it has no room to
	// grow keeps its size (and Mount succeeds). On copy-on-write filesystems
	// (btrfs) a reservation does not cover rewrites, so there the promise
	// holds only for blocks written once.
	Sparse bool
}

// Volume is a mounted (or once mounted) quota volume. It must not be
// copied.
type Volume struct {
	cfg        Config
	image      string // absolute path of the image
	mountpoint string // absolute, symlink-free path of the mountpoint

	// mu serializes Unmount and Destroy of this Volume, which callers may
	// invoke from several goroutines.
	mu sync.Mutex
}

// Home returns <mountpoint>/home.
func (v *Volume) Home() string { return filepath.Join(v.mountpoint, "home") }

// Tmp returns <mountpoint>/tmp.
func (v *Volume) Tmp() string { return filepath.Join(v.mountpoint, "tmp") }

// Mount creates the image if needed and mounts it on c.Mountpoint, then
// makes sure home and tmp exist with the right owner and mode. It is
// idempotent: if the image is already mounted at the mountpoint (according
// to /proc/self/mountinfo) it only grows the filesystem if asked to and
// fixes up home and tmp. It refuses to mount an image that is still attached
// to a loop device elsewhere (for example after a lazy unmount whose users
// have not exited yet), since mounting one ext4 filesystem twice corrupts it.
//
// Callers must not Mount the same image concurrently, nor while another
// Volume of that image is being unmounted or destroyed: nothing in this
// package serializes operations across Volumes (only Unmount and Destroy of
// one Volume are serialized). The sandbox layer guarantees this by owning
// exactly one Volume per sandbox.
func Mount(ctx context.Context, c Config) (*Volume, error) {
	v, err := newVolume(c)
	if err != nil {
		return nil, err
	}
	if c.SizeBytes < 0 {
		return nil, fmt.Errorf("quota: mount %s: negative size %d", c.Image, c.SizeBytes)
	}
	if c.UID < 0 || c.GID < 0 {
		return nil, fmt.Errorf("quota: mount %s: invalid owner %d:%d", c.Image, c.UID, c.GID)
	}
	if err := os.MkdirAll(c.Mountpoint, 0o755); err != nil {
		return nil, fmt.Errorf("quota: creating mountpoint: %w", err)
	}
	// The mountpoint exists now: resolve symlinks so the path compares
	// equal to the one in mountinfo.
	if err := v.resolveMountpoint(); err != nil {
		return nil, err
	}

	mounted, err := v.mounted()
	if err != nil {
		return nil, err
	}
	if !mounted {
		if err := v.prepareImage(ctx); err != nil {
			return nil, err
		}
		if err := v.run(ctx, "mounting "+v.image, "mount", "-t", "ext4",
			"-o", "loop,nosuid,nodev", v.image, v.mountpoint); err != nil {
			return nil, err
		}
	}
	if err := v.setup(ctx); err != nil {
		if !mounted {
			// Do not leave a half-set-up mount behind.
			_ = v.unmount(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	return v, nil
}

// Usage reports the bytes used and the total usable bytes of the mounted
// filesystem (statfs). It fails if the volume is not mounted.
func (v *Volume) Usage() (used, total int64, err error) {
	mounted, err := v.mounted()
	if err != nil {
		return 0, 0, err
	}
	if !mounted {
		return 0, 0, fmt.Errorf("quota: usage of %s: not mounted", v.mountpoint)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(v.mountpoint, &st); err != nil {
		return 0, 0, fmt.Errorf("quota: usage of %s: statfs: %w", v.mountpoint, err)
	}
	bsize := int64(st.Bsize)
	total = int64(st.Blocks) * bsize
	used = (int64(st.Blocks) - int64(st.Bfree)) * bsize
	return used, total, nil
}

// Unmount unmounts the volume and detaches its loop device. It is
// idempotent. If the filesystem is busy (a process still has a file open or
// its working directory in it) it falls back to a lazy unmount: the
// mountpoint is detached at once and the kernel frees the filesystem and the
// loop device (it is autoclear) when the last user goes away; until then
// Mount refuses to mount the same image again.
func (v *Volume) Unmount(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.unmount(ctx)
}

// Destroy unmounts the volume and deletes the image file and the mountpoint
// directory. It is idempotent. After a lazy unmount (see Unmount) the image's
// space is given back to the host only when the last user goes away.
func (v *Volume) Destroy(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.unmount(ctx); err != nil {
		return err
	}
	if err := os.Remove(v.image); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("quota: destroying: removing image: %w", err)
	}
	// Remove, not RemoveAll: the mountpoint is empty once unmounted, and
	// recursive deletion under a path that might still be a mountpoint is
	// too dangerous.
	if err := os.Remove(v.mountpoint); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("quota: destroying: removing mountpoint: %w", err)
	}
	return nil
}

// Available reports whether the host can provide quotas: running as root,
// loop device support and the needed programs. The error lists everything
// that is missing and how to fix it.
func Available() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "must run as root (mounting needs CAP_SYS_ADMIN)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		missing = append(missing, "no loop device support: /dev/loop-control is missing (modprobe loop; in a container, pass --device /dev/loop-control and the /dev/loopN devices)")
	}
	for _, t := range []struct{ name, pkg string }{
		{"mkfs.ext4", "e2fsprogs"},
		{"e2fsck", "e2fsprogs"},
		{"resize2fs", "e2fsprogs"},
		{"dumpe2fs", "e2fsprogs"},
		{"mount", "mount"},
		{"umount", "mount"},
		{"losetup", "mount"},
	} {
		if _, err := findTool(t.name); err != nil {
			missing = append(missing, fmt.Sprintf("%s not found (apt-get install %s)", t.name, t.pkg))
		}
	}
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && !bytes.Contains(b, []byte("ext4")) {
		// ext4 may be a module that is loaded on first mount; only
		// complain if it cannot be found at all.
		if _, err := exec.LookPath("modprobe"); err != nil {
			missing = append(missing, "kernel has no ext4 support listed in /proc/filesystems (modprobe ext4)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("quota: disk quotas unavailable: %s", strings.Join(missing, "; "))
	}
	return nil
}

// newVolume validates the paths of c and builds the Volume for it without
// touching the system.
func newVolume(c Config) (*Volume, error) {
	if c.Image == "" || c.Mountpoint == "" {
		return nil, errors.New("quota: config needs both Image and Mountpoint")
	}
	img, err := filepath.Abs(c.Image)
	if err != nil {
		return nil, fmt.Errorf("quota: image path: %w", err)
	}
	mp, err := filepath.Abs(c.Mountpoint)
	if err != nil {
		return nil, fmt.Errorf("quota: mountpoint path: %w", err)
	}
	// Resolve symlinks in the image's directory so that the path compares
	// equal to the loop device's backing_file.
	if dir, err := filepath.EvalSymlinks(filepath.Dir(img)); err == nil {
		img = filepath.Join(dir, filepath.Base(img))
	}
	v := &Volume{cfg: c, image: img, mountpoint: mp}
	_ = v.resolveMountpoint() // best effort; it may not exist yet
	return v, nil
}

func (v *Volume) resolveMountpoint() error {
	mp, err := filepath.EvalSymlinks(v.mountpoint)
	if err != nil {
		return fmt.Errorf("quota: resolving mountpoint: %w", err)
	}
	v.mountpoint = mp
	return nil
}

// prepareImage makes sure an unmounted, unattached, checked image exists.
func (v *Volume) prepareImage(ctx context.Context) error {
	_, err := os.Stat(v.image)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return v.createImage(ctx)
	case err != nil:
		return fmt.Errorf("quota: checking image: %w", err)
	}
	// Reuse. The image must not be in use through another loop device.
	if err := v.releaseLoops(ctx, "mounting "+v.image); err != nil {
		return err
	}
	grow, err := v.needsGrowth(ctx)
	if err != nil {
		return err
	}
	// Check (and replay the journal of) the filesystem; resize2fs wants a
	// forced full check first.
	args := []string{"-p", v.image}
	if grow {
		args = []string{"-f", "-p", v.image}
	}
	if stderr, err := v.output(ctx, "e2fsck", args...); err != nil {
		// Exit status 1 and 2 mean errors were corrected.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() > 2 {
			return cmdError("checking image "+v.image, "e2fsck", args, err, stderr)
		}
	}
	if grow {
		// A host with no room for the larger size keeps the image at its
		// size, files and all, until there is room.
		if err := v.extend(v.cfg.SizeBytes); errors.Is(err, syscall.ENOSPC) {
			grow = false
		} else if err != nil {
			return err
		}
	}
	// An image made sparse gets its reservation now. One the host has no
	// room for now is mounted as it is: refusing it would hide its files.
	if err := v.reserveFile(v.image); err != nil && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	if !grow {
		return nil
	}
	return v.run(ctx, "growing "+v.image, "resize2fs", v.image)
}

// extend makes the image file size bytes long (if it is shorter), its new
// blocks reserved on the host before the filesystem can use them (see
// Config.Sparse): ENOSPC leaves it as it was.
func (v *Volume) extend(size int64) error {
	fi, err := os.Stat(v.image)
	if err != nil {
		return fmt.Errorf("quota: growing image: %w", err)
	}
	if fi.Size() >= size {
		return nil
	}
	if !v.cfg.Sparse {
		f, err := os.OpenFile(v.image, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("quota: growing image: %w", err)
		}
		defer f.Close()
		err = unix.Fallocate(int(f.Fd()), 0, 0, size) // also sets the size
		if !errors.Is(err, syscall.EOPNOTSUPP) {
			if err != nil {
				f.Truncate(fi.Size()) // what it may have allocated past the end
				return fmt.Errorf("quota: reserving %d bytes on the host for %s: %w", size, v.image, err)
			}
			return nil
		}
	}
	if err := os.Truncate(v.image, size); err != nil {
		return fmt.Errorf("quota: growing image: %w", err)
	}
	return nil
}

// reserveFile reserves the blocks of the whole image file at p (see
// Config.Sparse). Blocks already allocated cost nothing, so it succeeds on
// a full host disk if the image was reserved before.
func (v *Volume) reserveFile(p string) error {
	if v.cfg.Sparse {
		return nil
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("quota: reserving image: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("quota: reserving image: %w", err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, fi.Size()); err != nil {
		return fmt.Errorf("quota: reserving %d bytes on the host for %s: %w", fi.Size(), v.image, err)
	}
	return nil
}

// needsGrowth reports whether the unmounted image's filesystem is smaller
// than SizeBytes (by at least one block). It looks at the filesystem, not
// the file, so a growth interrupted between extending the file and
// resizing the filesystem is finished on the next Mount.
func (v *Volume) needsGrowth(ctx context.Context) (bool, error) {
	if v.cfg.SizeBytes == 0 {
		return false, nil
	}
	out, stderr, err := v.output2(ctx, "dumpe2fs", "-h", v.image)
	if err != nil {
		return false, cmdError("reading the size of "+v.image, "dumpe2fs", []string{"-h", v.image}, err, stderr)
	}
	var count, size int64
	for line := range strings.SplitSeq(out, "\n") {
		k, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Block count":
			count, _ = strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		case "Block size":
			size, _ = strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		}
	}
	if count <= 0 || size <= 0 {
		return false, fmt.Errorf("quota: reading the size of %s: no block count and size in dumpe2fs output", v.image)
	}
	return count*size+size <= v.cfg.SizeBytes, nil
}

// createImage makes a new ext4 image. It is built under a temporary
// name and renamed into place, so a crash never leaves a half-made image at
// the configured path.
func (v *Volume) createImage(ctx context.Context) error {
	size := v.cfg.SizeBytes
	if size == 0 {
		return fmt.Errorf("quota: creating image %s: no size given", v.image)
	}
	if size < MinSizeBytes {
		return fmt.Errorf("quota: creating image %s: size %d is below the minimum of %d bytes", v.image, size, MinSizeBytes)
	}
	if err := os.MkdirAll(filepath.Dir(v.image), 0o700); err != nil {
		return fmt.Errorf("quota: creating image directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(v.image), "."+filepath.Base(v.image)+".new-*")
	if err != nil {
		return fmt.Errorf("quota: creating image: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("quota: creating image: sizing %s: %w", tmp, err)
	}
	// Reserved before mke2fs, to fail at once on a full host, and again
	// after it, since it punches holes in an image file to zero it.
	if err := v.reserveFile(tmp); err != nil {
		return err
	}
	if err := v.run(ctx, "creating filesystem in "+v.image, "mkfs.ext4",
		"-q", "-F", "-m", "0",
		"-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard",
		tmp); err != nil {
		return err
	}
	if err := v.reserveFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, v.image); err != nil {
		return fmt.Errorf("quota: creating image: %w", err)
	}
	ok = true
	return nil
}

// setup runs on a mounted volume: grow it if asked to and create home and
// tmp.
func (v *Volume) setup(ctx context.Context) error {
	if err := v.grow(ctx); err != nil {
		return err
	}
	// The root of the volume is root-owned 0755 (mkfs root_owner=0:0), so
	// nothing but root can have replaced these names.
	for _, name := range []string{"home", "tmp"} {
		p := filepath.Join(v.mountpoint, name)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("quota: creating %s: %w", p, err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("quota: creating %s: %w", p, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("quota: creating %s: exists and is not a directory", p)
		}
		if err := os.Lchown(p, v.cfg.UID, v.cfg.GID); err != nil {
			return fmt.Errorf("quota: setting owner of %s: %w", p, err)
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("quota: setting mode of %s: %w", p, err)
		}
	}
	return nil
}

// grow enlarges the image file and the mounted filesystem to SizeBytes if
// the image is smaller (online resize, for Mount of an already mounted
// volume; an unmounted image is grown offline by prepareImage). Online
// resizing needs CAP_SYS_RESOURCE; if it fails the image file is put back
// to its old size and the error says to remount.
func (v *Volume) grow(ctx context.Context) error {
	fi, err := os.Stat(v.image)
	if err != nil {
		return fmt.Errorf("quota: growing image: %w", err)
	}
	old := fi.Size()
	if v.cfg.SizeBytes <= old {
		return nil
	}
	dev, err := v.mountedDevice()
	if err != nil {
		return err
	}
	if dev == "" {
		return fmt.Errorf("quota: growing image %s: not mounted", v.image)
	}
	if err := v.extend(v.cfg.SizeBytes); errors.Is(err, syscall.ENOSPC) {
		return nil // as in prepareImage: kept at its size until there is room
	} else if err != nil {
		return err
	}
	err = v.run(ctx, "growing "+v.image, "losetup", "-c", dev)
	if err == nil {
		err = v.run(ctx, "growing mounted "+v.image+" online (needs CAP_SYS_RESOURCE; Unmount and Mount again to grow it offline)", "resize2fs", dev)
	}
	if err != nil {
		// The filesystem did not grow, so nothing lives past the old end.
		rctx := context.WithoutCancel(ctx)
		if terr := os.Truncate(v.image, old); terr == nil {
			_ = v.run(rctx, "shrinking back "+v.image, "losetup", "-c", dev)
		}
		return err
	}
	return nil
}

func (v *Volume) unmount(ctx context.Context) error {
	// Unmount until nothing of ours is left at the mountpoint (normally
	// one round; more only if something stacked mounts).
	for range 8 {
		mounted, err := v.mounted()
		if err != nil {
			return err
		}
		if !mounted {
			break
		}
		stderr, err := v.output(ctx, "umount", "-d", v.mountpoint)
		if err != nil {
			if !strings.Contains(stderr, "busy") {
				return cmdError("unmounting "+v.mountpoint, "umount", []string{"-d", v.mountpoint}, err, stderr)
			}
			if err := v.run(ctx, "lazily unmounting busy "+v.mountpoint, "umount", "-l", "-d", v.mountpoint); err != nil {
				return err
			}
		}
	}
	// Detach loop devices left attached to the image (for example by a
	// crash between losetup and mount inside mount(8)). A loop device that
	// is still in use, after a lazy unmount, is only marked autoclear by
	// the kernel and goes away with its last user: no waiting for that here
	// (a later Mount waits a little, see releaseLoops).
	if _, err := os.Stat(v.image); err == nil {
		if _, err := v.detachLoops(ctx, 0); err != nil {
			return err
		}
	}
	return nil
}

// detachLoops detaches the image's loop devices and waits up to wait for
// the kernel to let them go, which it may do after losetup returns. It
// returns those still attached: in use, after a lazy unmount.
func (v *Volume) detachLoops(ctx context.Context, wait time.Duration) ([]string, error) {
	deadline := time.Now().Add(wait)
	for {
		loops, err := v.loops(ctx)
		if err != nil || len(loops) == 0 {
			return loops, err
		}
		for _, dev := range loops {
			// Frees an unused device; an in-use one is only marked autoclear.
			_, _ = v.output(ctx, "losetup", "-d", dev)
		}
		if time.Now().After(deadline) {
			return v.loops(ctx)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// releaseLoops detaches stale loop devices of the image and fails if any is
// still in use.
func (v *Volume) releaseLoops(ctx context.Context, what string) error {
	loops, err := v.detachLoops(ctx, 2*time.Second)
	if err != nil {
		return err
	}
	if len(loops) > 0 {
		return fmt.Errorf("quota: %s: image is still in use through %s (mounted elsewhere, or lazily unmounted with processes still using it)",
			what, strings.Join(loops, ", "))
	}
	return nil
}

// loops lists the loop devices attached to the image.
func (v *Volume) loops(ctx context.Context) ([]string, error) {
	out, stderr, err := v.output2(ctx, "losetup", "-n", "-O", "NAME", "-j", v.image)
	if err != nil {
		return nil, cmdError("listing loop devices of "+v.image, "losetup", []string{"-n", "-O", "NAME", "-j", v.image}, err, stderr)
	}
	return strings.Fields(out), nil
}

// mounted reports whether the image is mounted at the mountpoint. It fails
// if something else is mounted there.
func (v *Volume) mounted() (bool, error) {
	dev, err := v.mountedDevice()
	return dev != "", err
}

// mountedDevice returns the loop device through which the image is mounted
// at the mountpoint (the topmost mount), or "" if nothing is mounted there.
func (v *Volume) mountedDevice() (string, error) {
	source, fstype, err := mountAt(v.mountpoint)
	if err != nil || source == "" {
		return "", err
	}
	if fstype == "ext4" && strings.HasPrefix(source, "/dev/loop") {
		b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(source), "loop", "backing_file"))
		if err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == v.image {
			return source, nil
		}
	}
	return "", fmt.Errorf("quota: %s has %s (%s) mounted on it, not the image %s", v.mountpoint, source, fstype, v.image)
}

// mountAt returns the source and type of the topmost mount at dir according
// to /proc/self/mountinfo, or "" if dir is not a mountpoint.
func mountAt(dir string) (source, fstype string, err error) {
	// Not SingleEntryFilter: it stops at the first (lowest) of stacked
	// mounts, and later lines are mounted on top of earlier ones.
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != dir, false
	})
	if err != nil {
		return "", "", fmt.Errorf("quota: reading mount table: %w", err)
	}
	if len(mounts) == 0 {
		return "", "", nil
	}
	top := mounts[len(mounts)-1]
	return top.Source, top.FSType, nil
}

// findTool finds a program in PATH or in the sbin directories, which a
// service's PATH often lacks.
func findTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or /usr/sbin, /sbin", name)
}

// run runs a command; the error says what was being done and includes the
// command's stderr.
func (v *Volume) run(ctx context.Context, what, name string, args ...string) error {
	stderr, err := v.output(ctx, name, args...)
	if err != nil {
		return cmdError(what, name, args, err, stderr)
	}
	return nil
}

// output runs a command and returns its stderr.
func (v *Volume) output(ctx context.Context, name string, args ...string) (stderr string, err error) {
	_, stderr, err = v.output2(ctx, name, args...)
	return stderr, err
}

// output2 runs a command and returns its stdout and stderr.
func (v *Volume) output2(ctx context.Context, name string, args ...string) (stdout, stderr string, err error) {
	path, err := findTool(name)
	if err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	// Untranslated messages: unmount looks for "busy" in them.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	return out.String(), strings.TrimSpace(errb.String()), err
}

func cmdError(what, name string, args []string, err error, stderr string) error {
	cmdline := strings.Join(append([]string{name}, args...), " ")
	if stderr == "" {
		return fmt.Errorf("quota: %s: %s: %w", what, cmdline, err)
	}
	return fmt.Errorf("quota: %s: %s: %w: %s", what, cmdline, err, stderr)
}

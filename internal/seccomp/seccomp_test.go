package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"testing"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

const (
	wantAllow  = 0x7fff0000
	wantKill   = 0x80000000
	wantEPERM  = 0x00050000 | 1
	wantENOSYS = 0x00050000 | 38

	auditArchI386 = 0x40000003
	auditArchARM  = 0x40000028
	x32Bit        = 0x40000000
)

// loadProgram decodes the bytes returned by Program back into instructions,
// so the tests exercise exactly what bwrap will read.
func loadProgram(t *testing.T) []bpf.Instruction {
	t.Helper()
	b, err := Program()
	if err != nil {
		t.Fatalf("Program: %v", err)
	}
	if len(b) == 0 || len(b)%8 != 0 {
		t.Fatalf("Program returned %d bytes, want a non-empty multiple of 8", len(b))
	}
	var insns []bpf.Instruction
	for i := 0; i < len(b); i += 8 {
		raw := bpf.RawInstruction{
			Op: binary.LittleEndian.Uint16(b[i:]),
			Jt: b[i+2],
			Jf: b[i+3],
			K:  binary.LittleEndian.Uint32(b[i+4:]),
		}
		insns = append(insns, raw.Disassemble())
	}
	return insns
}

// newVM wraps x/net/bpf's VM. That VM is meant for network packets and its
// LoadAbsolute reads big-endian, while the kernel reads seccomp_data in
// native byte order. Every load in our program is a 4-byte load at a 4-aligned
// offset inside seccomp_data (checked here), so byte-swapping each 32-bit word
// of the native struct before handing it to the VM yields exactly the values
// the kernel would load.
func newVM(t *testing.T) *bpf.VM {
	t.Helper()
	insns := loadProgram(t)
	for i, ins := range insns {
		switch ins := ins.(type) {
		case bpf.LoadAbsolute:
			if ins.Size != 4 || ins.Off%4 != 0 || ins.Off+4 > 64 {
				t.Fatalf("insn %d: %v is not an aligned 32-bit load inside seccomp_data", i, ins)
			}
		case bpf.JumpIf, bpf.Jump, bpf.RetConstant:
		default:
			t.Fatalf("insn %d: unexpected instruction %T %v", i, ins, ins)
		}
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	return vm
}

// seccompData builds struct seccomp_data in native byte order and converts it
// to the VM's big-endian view (see newVM).
func seccompData(nr, auditArch uint32, args ...uint64) []byte {
	var native [64]byte
	ne := binary.NativeEndian
	ne.PutUint32(native[0:], nr)
	ne.PutUint32(native[4:], auditArch)
	ne.PutUint64(native[8:], 0x7f0000001000) // instruction_pointer, irrelevant
	for i, a := range args {
		ne.PutUint64(native[16+8*i:], a)
	}
	var vm [64]byte
	for i := 0; i < 64; i += 4 {
		binary.BigEndian.PutUint32(vm[i:], ne.Uint32(native[i:]))
	}
	return vm[:]
}

func nativeInfo(t *testing.T) *arch.Info {
	t.Helper()
	tg, err := nativeTarget()
	if err != nil {
		t.Skip(err)
	}
	return tg.info
}

func run(t *testing.T, vm *bpf.VM, nr, auditArch uint32, args ...uint64) uint32 {
	t.Helper()
	got, err := vm.Run(seccompData(nr, auditArch, args...))
	if err != nil {
		t.Fatalf("vm.Run: %v", err)
	}
	return uint32(got)
}

func actionName(a uint32) string {
	switch a {
	case wantAllow:
		return "ALLOW"
	case wantKill:
		return "KILL_PROCESS"
	case wantEPERM:
		return "ERRNO(EPERM)"
	case wantENOSYS:
		return "ERRNO(ENOSYS)"
	}
	return fmt.Sprintf("%#x", a)
}

func TestPolicy(t *testing.T) {
	info := nativeInfo(t)
	vm := newVM(t)
	native := uint32(info.ID)
	nr := func(name string) uint32 {
		n, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %q on %s", name, info.Name)
		}
		return uint32(n)
	}

	const (
		tcgets    = 0x5401
		tiocgwinz = 0x5413
		fionread  = 0x541B
		// What glibc passes for pthread_create.
		threadFlags = 0x003d0f00
		// What glibc passes for fork(): CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID|SIGCHLD.
		forkFlags = 0x01200011
	)

	type tc struct {
		name   string
		nr     uint32
		arch   uint32 // 0 = native
		args   []uint64
		want   uint32
		x86    bool // amd64-only case
		arm64  bool // arm64-only case
		rawNr  bool // nr is used verbatim
		nrName string
	}
	cases := []tc{
		{name: "read", nrName: "read", want: wantAllow},
		{name: "write", nrName: "write", want: wantAllow},
		{name: "openat", nrName: "openat", want: wantAllow},
		{name: "mmap", nrName: "mmap", want: wantAllow},
		{name: "execve", nrName: "execve", want: wantAllow},
		{name: "exit_group", nrName: "exit_group", want: wantAllow},
		{name: "get_mempolicy", nrName: "get_mempolicy", want: wantAllow},
		{name: "seccomp (can only add filters)", nrName: "seccomp", want: wantAllow},
		{name: "clone thread", nrName: "clone", args: []uint64{threadFlags}, want: wantAllow},
		{name: "clone fork", nrName: "clone", args: []uint64{forkFlags}, want: wantAllow},
		{name: "clone no flags", nrName: "clone", args: []uint64{0}, want: wantAllow},
		{name: "ioctl TCGETS", nrName: "ioctl", args: []uint64{0, tcgets}, want: wantAllow},
		{name: "ioctl TIOCGWINSZ", nrName: "ioctl", args: []uint64{1, tiocgwinz}, want: wantAllow},
		{name: "ioctl FIONREAD", nrName: "ioctl", args: []uint64{3, fionread}, want: wantAllow},
		{name: "ioctl TIOCSTI in arg0 only", nrName: "ioctl", args: []uint64{ioctlTIOCSTI, tcgets}, want: wantAllow},
		{name: "personality PER_LINUX", nrName: "personality", args: []uint64{0}, want: wantAllow},
		{name: "personality query", nrName: "personality", args: []uint64{0xffffffff}, want: wantAllow},
		{name: "personality query sign-extended", nrName: "personality", args: []uint64{^uint64(0)}, want: wantAllow},
		{name: "personality UNAME26", nrName: "personality", args: []uint64{0x20000}, want: wantAllow},

		{name: "unshare", nrName: "unshare", args: []uint64{cloneNewUser}, want: wantEPERM},
		{name: "unshare no flags", nrName: "unshare", want: wantEPERM},
		{name: "setns", nrName: "setns", want: wantEPERM},
		{name: "mount", nrName: "mount", want: wantEPERM},
		{name: "umount2", nrName: "umount2", want: wantEPERM},
		{name: "pivot_root", nrName: "pivot_root", want: wantEPERM},
		{name: "chroot", nrName: "chroot", want: wantEPERM},
		{name: "fsopen", nrName: "fsopen", want: wantEPERM},
		{name: "open_tree", nrName: "open_tree", want: wantEPERM},
		{name: "mount_setattr", nrName: "mount_setattr", want: wantEPERM},
		{name: "clone CLONE_NEWUSER", nrName: "clone", args: []uint64{cloneNewUser}, want: wantEPERM},
		{name: "clone fork|CLONE_NEWNS", nrName: "clone", args: []uint64{forkFlags | cloneNewNS}, want: wantEPERM},
		{name: "clone CLONE_NEWTIME", nrName: "clone", args: []uint64{cloneNewTime}, want: wantEPERM},
		{name: "clone CLONE_NEWNET high bits", nrName: "clone", args: []uint64{0xffffffff00000000 | cloneNewNet}, want: wantEPERM},
		{name: "clone3", nrName: "clone3", args: []uint64{0, 88}, want: wantENOSYS},
		{name: "ioctl TIOCSTI", nrName: "ioctl", args: []uint64{0, ioctlTIOCSTI}, want: wantEPERM},
		{name: "ioctl TIOCSTI high bits", nrName: "ioctl", args: []uint64{0, 0xffffffff00005412}, want: wantEPERM},
		{name: "ioctl TIOCSTI bit 32", nrName: "ioctl", args: []uint64{0, 1<<32 | ioctlTIOCSTI}, want: wantEPERM},
		{name: "ioctl TIOCLINUX", nrName: "ioctl", args: []uint64{0, ioctlTIOCLINUX}, want: wantEPERM},
		{name: "ioctl TIOCLINUX high bits", nrName: "ioctl", args: []uint64{0, 0x8000000000000000 | ioctlTIOCLINUX}, want: wantEPERM},
		{name: "keyctl", nrName: "keyctl", want: wantEPERM},
		{name: "add_key", nrName: "add_key", want: wantEPERM},
		{name: "bpf", nrName: "bpf", want: wantEPERM},
		{name: "perf_event_open", nrName: "perf_event_open", want: wantEPERM},
		{name: "userfaultfd", nrName: "userfaultfd", want: wantEPERM},
		{name: "ptrace", nrName: "ptrace", want: wantEPERM},
		{name: "process_vm_readv", nrName: "process_vm_readv", want: wantEPERM},
		{name: "pidfd_getfd", nrName: "pidfd_getfd", want: wantEPERM},
		{name: "io_uring_setup", nrName: "io_uring_setup", want: wantEPERM},
		{name: "io_uring_enter", nrName: "io_uring_enter", want: wantEPERM},
		{name: "init_module", nrName: "init_module", want: wantEPERM},
		{name: "kexec_load", nrName: "kexec_load", want: wantEPERM},
		{name: "reboot", nrName: "reboot", want: wantEPERM},
		{name: "open_by_handle_at", nrName: "open_by_handle_at", want: wantEPERM},
		{name: "personality ADDR_NO_RANDOMIZE", nrName: "personality", args: []uint64{0x0040000}, want: wantEPERM},
		{name: "personality READ_IMPLIES_EXEC", nrName: "personality", args: []uint64{0x0400000}, want: wantEPERM},
		{name: "iopl", nrName: "iopl", want: wantEPERM, x86: true},
		{name: "modify_ldt", nrName: "modify_ldt", want: wantEPERM, x86: true},

		// Foreign ABIs.
		{name: "i386 read", nr: 3, rawNr: true, arch: auditArchI386, want: wantKill, x86: true},
		{name: "i386 getpid", nr: 20, rawNr: true, arch: auditArchI386, want: wantKill, x86: true},
		{name: "i386 unshare", nr: 310, rawNr: true, arch: auditArchI386, want: wantKill, x86: true},
		{name: "x32 read", nr: x32Bit | 0, rawNr: true, want: wantENOSYS, x86: true},
		{name: "x32 ioctl", nr: x32Bit | 514, rawNr: true, args: []uint64{0, ioctlTIOCSTI}, want: wantENOSYS, x86: true},
		{name: "x32 unshare", nr: x32Bit | 272, rawNr: true, want: wantENOSYS, x86: true},
		{name: "nr -1", nr: 0xffffffff, rawNr: true, want: wantENOSYS, x86: true},
		{name: "aarch32 read", nr: 3, rawNr: true, arch: auditArchARM, want: wantKill, arm64: true},
		{name: "unknown arch", nr: 0, rawNr: true, arch: 0xdeadbeef, want: wantKill},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.x86 && runtime.GOARCH != "amd64" || c.arm64 && runtime.GOARCH != "arm64" {
				t.Skip("not this architecture")
			}
			n := c.nr
			if !c.rawNr {
				n = nr(c.nrName)
			}
			a := c.arch
			if a == 0 {
				a = native
			}
			if got := run(t, vm, n, a, c.args...); got != c.want {
				t.Errorf("nr=%#x arch=%#x args=%#x: got %s, want %s", n, a, c.args, actionName(got), actionName(c.want))
			}
		})
	}
}

// Every listed name is refused, everything not listed (and not argument
// dependent) is allowed with zeroed arguments.
func TestDeniedMatchesProgram(t *testing.T) {
	info := nativeInfo(t)
	vm := newVM(t)
	denied := Denied()
	if !slices.IsSorted(denied) {
		t.Errorf("Denied() not sorted")
	}
	for _, must := range []string{"unshare", "mount", "clone3", "keyctl", "bpf", "ptrace", "io_uring_setup", "perf_event_open", "userfaultfd"} {
		if !slices.Contains(denied, must) {
			t.Errorf("Denied() lacks %q", must)
		}
	}
	for name, n := range info.SyscallNames {
		got := run(t, vm, uint32(n), uint32(info.ID))
		want := uint32(wantAllow)
		switch {
		case name == "clone3":
			want = wantENOSYS
		case slices.Contains(denied, name):
			want = wantEPERM
		}
		if got != want {
			t.Errorf("%s (%d): got %s, want %s", name, n, actionName(got), actionName(want))
		}
	}
	for i, n := range denied {
		if i > 0 && denied[i-1] == n {
			t.Errorf("duplicate entry %q", n)
		}
	}
}

// Every clone namespace flag on its own is refused.
func TestCloneEachNamespaceFlag(t *testing.T) {
	info := nativeInfo(t)
	vm := newVM(t)
	clone := uint32(info.SyscallNames["clone"])
	for bit := range 32 {
		flag := uint64(1) << bit
		want := uint32(wantAllow)
		if flag&cloneNamespaceFlags != 0 {
			want = wantEPERM
		}
		if got := run(t, vm, clone, uint32(info.ID), flag); got != want {
			t.Errorf("clone(%#x): got %s, want %s", flag, actionName(got), actionName(want))
		}
	}
}

// The table must be valid on every supported architecture, not just the one
// running the tests.
func TestPolicyTablesAllArches(t *testing.T) {
	for _, tg := range []target{{info: arch.X86_64, extra: denyX86}, {info: arch.AARCH64}} {
		if _, err := policyFor(tg); err != nil {
			t.Errorf("%s: %v", tg.info.Name, err)
		}
		for _, n := range []string{"ioctl", "clone", "personality"} {
			if _, ok := tg.info.SyscallNames[n]; !ok {
				t.Errorf("%s: no %s", tg.info.Name, n)
			}
		}
	}
	// x86-only entries really are absent on arm64 (otherwise they belong in denyAll).
	for _, n := range denyX86 {
		if _, ok := arch.AARCH64.SyscallNames[n]; ok {
			t.Errorf("%s exists on aarch64; move it to denyAll", n)
		}
	}
	seen := map[string]bool{}
	for _, n := range slices.Concat(denyAll, denyX86, denyENOSYS) {
		if seen[n] {
			t.Errorf("duplicate table entry %q", n)
		}
		seen[n] = true
	}
}

func TestProgramRoundTrip(t *testing.T) {
	insns, err := instructions()
	if err != nil {
		t.Skip(err)
	}
	want, err := bpf.Assemble(insns)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bpf.Assemble(loadProgram(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("decoded program differs from assembled program")
	}
	if _, ok := insns[len(insns)-1].(bpf.RetConstant); !ok {
		t.Fatalf("program does not end in a return")
	}
	if uint32(libseccomp.ActionKillProcess) != wantKill || uint32(libseccomp.ActionAllow) != wantAllow {
		t.Fatalf("library action constants changed")
	}
	t.Logf("%d instructions (%d bytes)", len(insns), 8*len(insns))
}

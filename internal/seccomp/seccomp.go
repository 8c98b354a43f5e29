// Package seccomp builds the seccomp-bpf filter that confines user code in a
// jail. It owns the syscall policy and its encoding as a raw classic-BPF
// program (an array of struct sock_filter), nothing else: it neither loads the
// filter nor sets no_new_privs. The threat model is hostile Python/Node code
// that already runs as an unprivileged user inside bubblewrap's namespaces and
// tries to reach kernel attack surface that those namespaces do not fence off:
// creating or joining namespaces and mounts (to undo the jail), the
// non-namespaced keyring, eBPF, perf, userfaultfd and io_uring (popular
// exploit primitives), ptrace-style access to other processes, module/kexec/
// reboot/clock/swap administration, TTY input injection (TIOCSTI/TIOCLINUX),
// and syscall-table confusion through the i386 and x32 ABIs. The policy is a
// denylist over default-allow, modelled on the deny decisions of Docker's
// default profile. bwrap applies the filter (after setting no_new_privs
// itself) as the very last step before it execs the user program, so bwrap's
// own setup is unaffected while everything the user program and its children
// do is filtered, and the filter cannot be removed.
package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sort"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// Return values of a seccomp filter (include/uapi/linux/seccomp.h).
const (
	retKillProcess = uint32(libseccomp.ActionKillProcess) // 0x80000000
	retErrno       = uint32(libseccomp.ActionErrno)       // 0x00050000 | errno
	retAllow       = uint32(libseccomp.ActionAllow)       // 0x7fff0000

	errnoEPERM  = 1  // same value on amd64 and arm64
	errnoENOSYS = 38 // same value on amd64 and arm64
)

// Offsets into struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Namespace flags that clone(2) must not carry (include/uapi/linux/sched.h).
const (
	cloneNewTime   = 0x00000080
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	cloneNamespaceFlags = cloneNewTime | cloneNewNS | cloneNewCgroup | cloneNewUTS |
		cloneNewIPC | cloneNewUser | cloneNewPID | cloneNewNet
)

// TTY ioctls that are refused. Values are identical on amd64 and arm64
// (asm-generic/ioctls.h).
const (
	ioctlTIOCSTI   = 0x5412 // push bytes into the terminal's input queue
	ioctlTIOCLINUX = 0x541C // console control, includes selection paste (input injection)
)

// denyAll is refused with EPERM on every supported architecture.
var denyAll = []string{
	// Namespaces, mounts and root changes: the tools to undo the jail.
	"unshare",
	"setns",
	"mount",
	"umount2",
	"pivot_root",
	"chroot",
	// New mount API.
	"open_tree",
	"open_tree_attr",
	"move_mount",
	"fsopen",
	"fsconfig",
	"fsmount",
	"fspick",
	"mount_setattr",

	// Kernel keyring: not namespaced, shared with the host.
	"add_key",
	"request_key",
	"keyctl",

	// Big kernel attack surfaces that are frequent exploit primitives.
	"bpf",
	"perf_event_open",
	"userfaultfd", // used to stall the kernel and widen race windows
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",

	// Inspecting or stealing from other processes.
	"ptrace",
	"process_vm_readv",
	"process_vm_writev",
	"pidfd_getfd", // grabs another process's file descriptors
	"kcmp",        // compares kernel objects of other processes (info leak)

	// Kernel code, kexec, power.
	"kexec_load",
	"kexec_file_load",
	"init_module",
	"finit_module",
	"delete_module",
	"reboot",

	// Host-wide administration.
	"swapon",
	"swapoff",
	"acct",
	"syslog", // kernel log can leak kernel addresses
	"quotactl",
	"quotactl_fd",
	"lookup_dcookie",
	"nfsservctl",
	"open_by_handle_at", // "shocker": opens files by handle, bypassing the mount tree
	"name_to_handle_at", // companion of open_by_handle_at
	"settimeofday",
	"clock_settime",
	"adjtimex",
	"clock_adjtime",
	"vhangup",
	"fanotify_init",
	"sethostname",
	"setdomainname",

	// NUMA placement of memory: host-wide effects, Docker requires CAP_SYS_NICE.
	// get_mempolicy stays allowed: it is read-only and runtimes probe it.
	"mbind",
	"set_mempolicy",
	"set_mempolicy_home_node",
	"move_pages",
	"migrate_pages",
}

// denyX86 is refused with EPERM on amd64 only (these calls do not exist on
// arm64).
var denyX86 = []string{
	"iopl",       // raw I/O port access
	"ioperm",     // raw I/O port access
	"modify_ldt", // segment games, history of kernel bugs
	"uselib",
	"ustat",
	"sysfs",
	"_sysctl",
	// Obsolete or never implemented; refuse explicitly as Docker does.
	"create_module",
	"get_kernel_syms",
	"query_module",
	"afs_syscall",
	"tuxcall",
	"security",
	"vserver",
}

// denyENOSYS is refused with ENOSYS rather than EPERM.
var denyENOSYS = []string{
	// clone3 passes its flags in a struct in user memory, which seccomp cannot
	// read. ENOSYS makes glibc (and others) fall back to clone(2), whose flags
	// are a register and are checked below.
	"clone3",
}

// personalityAllowed are the only personality(2) arguments accepted (the
// same set as Docker). Anything else, e.g. ADDR_NO_RANDOMIZE or
// READ_IMPLIES_EXEC, is refused with EPERM. 0xffffffff only queries.
var personalityAllowed = []uint64{
	0x0,                // PER_LINUX
	0x8,                // PER_LINUX32
	0x20000,            // UNAME26
	0x20008,            // PER_LINUX32 | UNAME26
	0xffffffff,         // query
	0xffffffffffffffff, // query, when a caller sign-extends -1
}

// target describes a supported native architecture.
type target struct {
	info  *arch.Info
	extra []string // additional EPERM names
}

func nativeTarget() (target, error) {
	switch runtime.GOARCH {
	case "amd64":
		return target{info: arch.X86_64, extra: denyX86}, nil
	case "arm64":
		return target{info: arch.AARCH64}, nil
	}
	return target{}, fmt.Errorf("seccomp: unsupported architecture %q (want amd64 or arm64)", runtime.GOARCH)
}

// argLoOffset is the offset of the low 32 bits of args[i] in seccomp_data.
// Both supported architectures are little-endian, so the low word comes first.
func argLoOffset(i uint32) uint32 { return offArgs + 8*i }

// Denied lists the syscall names the policy refuses (for `codecell doctor`
// and tests): the unconditional denials for the native architecture, sorted.
// Calls refused only for some arguments (clone with namespace flags, ioctl
// TIOCSTI/TIOCLINUX, personality with unusual values) and foreign ABIs are
// not listed.
func Denied() []string {
	var names []string
	names = append(names, denyAll...)
	names = append(names, denyENOSYS...)
	if runtime.GOARCH == "amd64" {
		names = append(names, denyX86...)
	}
	sort.Strings(names)
	return names
}

// Program returns the filter for the native architecture as raw sock_filter
// bytes, ready to be written to the fd given to bwrap --seccomp.
func Program() ([]byte, error) {
	insns, err := instructions()
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	if len(raw) > 4096 { // BPF_MAXINSNS
		return nil, fmt.Errorf("seccomp: program too long (%d instructions)", len(raw))
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		// struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; },
		// native (little) endian on both supported architectures.
		out = binary.LittleEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.LittleEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// instructions builds the whole program:
//
//  1. our prelude: kill the process unless seccomp_data.arch is the native
//     audit arch, then the ioctl check on the low 32 bits of arg1;
//  2. the go-seccomp-bpf policy: (on amd64) ENOSYS for x32 numbers, then the
//     deny groups, default allow.
//
// The prelude exists because the library cannot express two things: its
// arch-mismatch path jumps to the policy's default action (allow, for a
// denylist), and its argument conditions always compare all 64 bits, while
// the kernel truncates the ioctl cmd to 32 bits.
func instructions() ([]bpf.Instruction, error) {
	t, err := nativeTarget()
	if err != nil {
		return nil, err
	}
	policy, err := policyFor(t)
	if err != nil {
		return nil, err
	}
	lib, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: policy: %w", err)
	}

	ioctlNr, ok := t.info.SyscallNames["ioctl"]
	if !ok {
		return nil, fmt.Errorf("seccomp: no ioctl on %s", t.info.Name)
	}

	// Foreign ABIs (i386 via int 0x80 on amd64, AArch32 on arm64) kill the
	// process instead of returning an error: the denylist is keyed on native
	// syscall numbers and means nothing for another syscall table, no
	// legitimate Python/Node process uses those ABIs, and a kill (SIGSYS) is
	// loud and cannot be probed around the way an errno can.
	prelude := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: offArch, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(t.info.ID), SkipTrue: 1},
		/* 2 */ bpf.RetConstant{Val: retKillProcess},
		/* 3 */ bpf.LoadAbsolute{Off: offNr, Size: 4},
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(ioctlNr), SkipFalse: 4}, // -> 9
		// Only the low 32 bits of cmd: the kernel's ioctl takes an
		// unsigned int cmd, so high bits would dodge a 64-bit compare.
		/* 5 */ bpf.LoadAbsolute{Off: argLoOffset(1), Size: 4},
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctlTIOCSTI, SkipTrue: 1}, // -> 8
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctlTIOCLINUX, SkipFalse: 1}, // -> 9
		/* 8 */ bpf.RetConstant{Val: retErrno | errnoEPERM},
		// 9: the library program, which reloads arch and nr itself.
	}
	return append(prelude, lib...), nil
}

// policyFor is the declarative part of the policy, expressed with the
// library. Its own arch check is redundant after our prelude (and always
// passes).
func policyFor(t target) (*libseccomp.Policy, error) {
	for _, list := range [][]string{denyAll, t.extra, denyENOSYS} {
		for _, n := range list {
			if _, ok := t.info.SyscallNames[n]; !ok {
				return nil, fmt.Errorf("seccomp: syscall %q unknown on %s", n, t.info.Name)
			}
		}
	}

	eperm := append(append([]string(nil), denyAll...), t.extra...)

	var personality libseccomp.ArgumentConditions
	for _, v := range personalityAllowed {
		personality = append(personality, libseccomp.Condition{Argument: 0, Operation: libseccomp.NotEqual, Value: v})
	}

	return &libseccomp.Policy{
		DefaultAction: libseccomp.ActionAllow,
		Syscalls: []libseccomp.SyscallGroup{
			{
				Action: libseccomp.ActionErrno | libseccomp.Action(errnoENOSYS),
				Names:  denyENOSYS,
			},
			{
				Action: libseccomp.ActionErrno, // the library adds EPERM
				Names:  eperm,
				NamesWithCondtions: []libseccomp.NameWithConditions{
					// clone's flags are arg0 on both x86_64 and arm64 (only the
					// order of the later args differs). The flags all live in
					// the low 32 bits, which is what the kernel uses.
					{Name: "clone", Conditions: libseccomp.ArgumentConditions{
						{Argument: 0, Operation: libseccomp.BitsSet, Value: cloneNamespaceFlags},
					}},
					// All NotEqual conditions are ANDed: deny unless one
					// of the allowed values.
					{Name: "personality", Conditions: personality},
				},
			},
		},
	}, nil
}

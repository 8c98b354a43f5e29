package kernel

import (
	"os"

	"github.com/codecell/codecell/internal/cgroup"
	"strconv"
	"strings"
	"time"
)

// Usage is what one cell consumed.
type Usage struct {
	WallTime time.Duration
	// CPUTime is user and system time of the interpreter and of the child
	// processes it waited for during the cell.
	CPUTime time.Duration
	// PeakMemoryBytes is the highest memory use of the kernel's process tree
	// during the cell (on cgroup v2: since the kernel started). 0 if unknown.
	PeakMemoryBytes int64
}

// clockTick is the unit of /proc/<pid>/stat times: USER_HZ, 100 on every
// Linux architecture codecell runs on.
const clockTick = 10 * time.Millisecond

// cpuTime returns utime+stime+cutime+cstime of pid from /proc/<pid>/stat.
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it are fixed.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state is f[0], so utime (field 14) is f[11].
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// meter measures one cell of the kernel pid, whose processes are in cg.
type meter struct {
	cg    *cgroup.Group // nil: memory is not measured
	pid   int           // 0: CPU time is not measured
	cpu0  time.Duration
	start time.Time
}

func startMeter(pid int, cg *cgroup.Group) meter {
	if cg != nil {
		cg.ResetMemoryPeak()
	}
	return meter{cg: cg, pid: pid, cpu0: cpuTime(pid), start: time.Now()}
}

func (m meter) stop() Usage {
	u := Usage{WallTime: time.Since(m.start)}
	if cpu := cpuTime(m.pid); cpu >= m.cpu0 {
		u.CPUTime = cpu - m.cpu0
	}
	if m.cg != nil {
		u.PeakMemoryBytes, _ = m.cg.MemoryPeak()
	}
	return u
}

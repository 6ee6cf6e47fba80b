// SPDX-License-Identifier: GPL-2.0
/*
 * l2mon: run N L2 guests at once in the emulated machine (L1) and measure
 * the host (L1) CPU time of each workload phase (benchmarks/l2).
 *
 *   l2mon -n GUESTS -k KERNEL -i INITRD [-m MiB] [-t SECONDS]
 *         -P NAME:L2IO-ARGS [-P ...] -- QEMU [QEMU-ARGS...]
 *
 * Starts GUESTS copies of QEMU (QEMU-ARGS plus a console on stdio, the
 * guest's own disk /tmp/l2mon/disk-I, a human monitor on the unix socket
 * /tmp/l2mon/mon-I and a virtio-net device whose frames go as UDP
 * datagrams to l2mon's sink socket), waits until every guest
 * says "l2: ready", then runs the phases in order on all guests at once:
 * it sends "run NAME ARGS" to every console and waits until each answers
 * "l2: done NAME". Per phase it prints one line
 *
 *   bench: l2-GUESTS-NAME ns=NS_PER_OP cpu_ms=... wall_ms=... ops=...
 *          exits=... enters=... fallbacks=... flushes=... skipped=...
 *          x_irq=... x_sched=... x_user=... x_timer=... x_ioeventfd=...
 *          x_faultin=... kicks=... smt_waits=... [perf_ms=... perf_enters=...
 *          perf_exits=... perf_faults=...] guests=... frames=... l2_ms=...
 *
 * where cpu_ms is the CPU time of all QEMU processes (every thread: vCPU,
 * I/O, main loop; read with clock_getcpuclockid()), ns per operation is
 * cpu_ms over the operations of all guests, and the counters are the
 * deltas of KVM's statistics in /sys/kernel/debug/kvm (0 where a counter
 * does not exist, as with ASI compiled out). frames counts the network
 * frames the sink received, guests those still in the run. A guest that
 * dies or does not answer in time is lost: its console's last lines are
 * printed, it is killed and the others go on; the phase it was lost in
 * prints no line (its CPU time left the sum), the later ones count the
 * guests left, and l2mon exits 1 at the end (at once when none is left).
 * For each
 * guest that does not answer in time, l2mon first asks its monitor twice,
 * 2 s apart, for "info registers", "x/6i $pc" and "x/48gx $sp" and prints
 * the answers as "l2mon: guest I: regs|code|stack: ..." lines (the
 * FPU and vector registers left out), so that one sees where the guest's
 * vCPU is and whether RIP moves; a monitor that does not answer in 5 s is
 * reported as such (a vCPU stuck in KVM_RUN blocks "info registers").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GUESTS	32
#define MAX_PHASES	16
#define SINK_PORT	9000
#define DIR		"/tmp/l2mon"

struct guest {
	pid_t pid;
	int in, out;		/* the guest console: write end, read end */
	char buf[4096];		/* the console's current partial line */
	size_t len;
	char tail[8][160];	/* the last lines, for a failure report */
	unsigned int ntail;	/* lines seen; tail[] is a ring */
	int state;		/* 0 booting, 1 ready / phase done, 2 running */
	long ops, errors;
	uint64_t l2_ns;
	int lost;		/* stalled or died: killed, out of the run */
};

static struct guest guests[MAX_GUESTS];
static int nguests, nlost, sink = -1;
static long frames;

/*
 * KVM statistics (/sys/kernel/debug/kvm/STAT, summed over every VM) and
 * the key each phase's line gives their delta under. The first five are
 * the fields benchmarks/bench.py requires; the rest break the exits from
 * the restricted table down by reason (interrupt entry, schedule-out,
 * return to user space, and KVM's planned exits before it arms the APIC
 * timer, signals an ioeventfd or looks up a guest page's host page; the
 * fallbacks are the rest) and count the SMT sibling protocol.
 */
static const struct {
	const char *stat, *key;
} stats[] = {
	{ "exits", "exits" },
	{ "asi_enters", "enters" },
	{ "asi_fallbacks", "fallbacks" },
	{ "asi_flushes", "flushes" },
	{ "asi_flushes_skipped", "skipped" },
	{ "asi_exits_interrupt", "x_irq" },
	{ "asi_exits_sched", "x_sched" },
	{ "asi_exits_owner", "x_user" },
	{ "asi_exits_planned_timer", "x_timer" },
	{ "asi_exits_planned_ioeventfd", "x_ioeventfd" },
	{ "asi_exits_planned_faultin", "x_faultin" },
	{ "asi_smt_kicks", "kicks" },
	{ "asi_smt_waits", "smt_waits" },
};
#define NSTATS (sizeof(stats) / sizeof(stats[0]))

/* Where guest @i's QEMU threads wait, its fault sites and console tail. */
static void diagnose(int i)
{
	unsigned int j;
	char cmd[1024];

	/* Where QEMU's threads wait, and the VM's ASI fault sites. */
	snprintf(cmd, sizeof(cmd),
		 "for t in /proc/%d/task/*; do echo \"l2mon: guest %d: thread $(cat $t/comm) state $(cut -d' ' -f3 $t/stat) wchan $(cat $t/wchan)\"; "
		 "sed 's/^/l2mon:   /' $t/stack 2>/dev/null; done; "
		 "for f in /sys/kernel/debug/kvm/%d-*/asi/faults; do "
		 "[ -r $f ] && echo \"l2mon: guest %d: $f:\" && sed 's/^/l2mon:   /' $f | head -12; done; "
		 /* Does KVM still exit, fault and fall back, 5 s apart? */
		 "for k in 1 2; do d=$(echo /sys/kernel/debug/kvm/%d-*); "
		 "echo \"l2mon: guest %d: counters:\" $(cd $d 2>/dev/null && for c in exits pf_taken "
		 "halt_exits irq_exits io_exits mmio_exits asi_enters asi_fallbacks; do "
		 "printf '%%s=%%s ' $c $(cat $c 2>/dev/null); done); sleep 5; done",
		 guests[i].pid, i, guests[i].pid, i, guests[i].pid, i);
	if (guests[i].pid > 0 && system(cmd))
		printf("l2mon: guest %d: no diagnostics\n", i);
	j = guests[i].ntail > 8 ? guests[i].ntail - 8 : 0;
	for (; j < guests[i].ntail; j++)
		printf("l2mon: guest %d: %s\n", i, guests[i].tail[j % 8]);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	int i;

	va_start(ap, fmt);
	fputs("l2mon: ", stdout);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	for (i = 0; i < nguests; i++) {
		if (guests[i].lost)
			continue;
		diagnose(i);
		if (guests[i].pid > 0)
			kill(guests[i].pid, SIGKILL);
	}
	exit(1);
}

/*
 * A guest that stalls or dies costs its own samples, not the run: it is
 * diagnosed, killed and left out of every later phase, and l2mon exits 1
 * at the end. The run ends only when no guest is left.
 */
static void lose(int i, const char *why)
{
	struct guest *gu = &guests[i];
	int status;

	printf("l2mon: guest %d lost: %s; the other guests go on\n", i, why);
	diagnose(i);
	if (gu->len)
		printf("l2mon: guest %d: %s\n", i, gu->buf);	/* QEMU's last words */
	if (gu->pid > 0) {
		kill(gu->pid, SIGKILL);
		if (waitpid(gu->pid, &status, 0) == gu->pid) {
			if (WIFSIGNALED(status))
				printf("l2mon: guest %d: QEMU ended by signal %d\n", i,
				       WTERMSIG(status));
			else if (WIFEXITED(status))
				printf("l2mon: guest %d: QEMU exit status %d\n", i,
				       WEXITSTATUS(status));
		}
	}
	close(gu->in);
	close(gu->out);
	gu->lost = 1;
	if (++nlost == nguests)
		die("every guest is lost");
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* CPU time of every QEMU process, threads that already exited included. */
static uint64_t qemu_cpu_ns(void)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < nguests; i++) {
		struct timespec ts;
		clockid_t clk;

		if (guests[i].lost)
			continue;
		if (clock_getcpuclockid(guests[i].pid, &clk) ||
		    clock_gettime(clk, &ts))
			die("guest %d: no CPU clock: %s", i, strerror(errno));
		sum += ts.tv_sec * 1000000000ull + ts.tv_nsec;
	}
	return sum;
}

static void read_stats(uint64_t *v)
{
	char path[128];
	size_t i;

	for (i = 0; i < NSTATS; i++) {
		unsigned long long x = 0;
		FILE *f;

		snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%s", stats[i].stat);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%llu", &x) != 1)
				x = 0;
			fclose(f);
		}
		v[i] = x;
	}
}

static void line(int g, char *s)
{
	struct guest *gu = &guests[g];
	char name[64];

	snprintf(gu->tail[gu->ntail++ % 8], sizeof(gu->tail[0]), "%s", s);
	if (!strncmp(s, "l2: ready", 9) && gu->state == 0) {
		gu->state = 1;
		printf("l2mon: guest %d: %s\n", g, s);
	} else if (!strncmp(s, "l2: done ", 9) && gu->state == 2) {
		unsigned long long ns = 0;
		int rc = -1;

		if (sscanf(s, "l2: done %63s rc=%d ops=%ld errors=%ld ns=%llu",
			   name, &rc, &gu->ops, &gu->errors, &ns) != 5 || rc)
			die("guest %d failed: %s", g, s);
		gu->l2_ns = ns;
		gu->state = 1;
	}
}

/* Read what the consoles and the sink have; wait at most @ms. */
static void pump(int ms)
{
	struct pollfd p[MAX_GUESTS + 1];
	int i, n;

	for (i = 0; i < nguests; i++)
		p[i] = (struct pollfd){ .fd = guests[i].lost ? -1 : guests[i].out,
					.events = POLLIN };
	p[nguests] = (struct pollfd){ .fd = sink, .events = POLLIN };
	n = poll(p, nguests + 1, ms);
	if (n < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	if (n <= 0)
		return;
	if (p[nguests].revents & POLLIN) {
		char f[2048];

		while (recv(sink, f, sizeof(f), MSG_DONTWAIT) > 0)
			frames++;
	}
	for (i = 0; i < nguests; i++) {
		struct guest *gu = &guests[i];
		ssize_t r;
		char *nl;

		if (gu->lost || !(p[i].revents & (POLLIN | POLLHUP)))
			continue;
		r = read(gu->out, gu->buf + gu->len, sizeof(gu->buf) - 1 - gu->len);
		if (r <= 0) {
			lose(i, "console closed (QEMU exited)");
			continue;
		}
		gu->len += r;
		gu->buf[gu->len] = 0;
		while ((nl = strpbrk(gu->buf, "\r\n"))) {
			*nl = 0;
			if (nl != gu->buf)
				line(i, gu->buf);
			gu->len -= nl + 1 - gu->buf;
			memmove(gu->buf, nl + 1, gu->len + 1);
		}
		if (gu->len == sizeof(gu->buf) - 1)
			gu->len = 0;	/* a line too long to matter */
	}
}

/*
 * Read what the monitor @fd says up to its "(qemu) " prompt into @buf (the
 * prompt cut off); at most 5 s. Returns 0, or -1 without a prompt.
 */
static int mon_read(int fd, char *buf, size_t size)
{
	uint64_t end = mono_ns() + 5000000000ull;
	size_t len = 0;
	char *prompt;

	buf[0] = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = mono_ns();
		ssize_t r;
		int n;

		if (now >= end || len == size - 1)
			return -1;
		n = poll(&p, 1, (end - now) / 1000000 + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		r = read(fd, buf + len, size - 1 - len);
		if (r <= 0)
			return -1;
		len += r;
		buf[len] = 0;
		prompt = strstr(buf, "(qemu) ");
		if (prompt) {
			*prompt = 0;
			return 0;
		}
	}
}

/*
 * Print the monitor's answer @s to @cmd line by line as "l2mon: guest G:
 * TAG: LINE", without the terminal escapes, the echo of @cmd and the FPU
 * and vector registers.
 */
static void mon_print(int g, const char *tag, const char *s, const char *cmd)
{
	static const char *const skip[] = { "FPR", "XMM", "YMM", "ZMM", "Opmask" };
	char l[256];
	size_t n = 0, i;

	for (;; s++) {
		if (*s == '\033') {
			/* ESC [ parameters final-byte, as readline's echo has */
			if (s[1] == '[')
				for (s += 2; *s && (*s < 0x40 || *s > 0x7e); s++)
					;
			if (!*s)
				break;
			continue;
		}
		if (*s && *s != '\n') {
			if (*s >= ' ' && *s < 0x7f && n < sizeof(l) - 1)
				l[n++] = *s;
			continue;
		}
		l[n] = 0;
		for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
			if (!strncmp(l, skip[i], strlen(skip[i])))
				break;
		if (n && !strstr(l, cmd) && i == sizeof(skip) / sizeof(skip[0]))
			printf("l2mon: guest %d: %s: %s\n", g, tag, l);
		n = 0;
		if (!*s)
			break;
	}
}

/* Send @cmd to the monitor @fd and print its answer; -1 without one. */
static int mon_cmd(int g, int fd, const char *cmd, const char *tag)
{
	static char buf[16384];
	char line[64];
	int n, ret;

	n = snprintf(line, sizeof(line), "%s\n", cmd);
	if (send(fd, line, n, MSG_NOSIGNAL) != n) {
		printf("l2mon: guest %d: %s: monitor write: %s\n", g, tag,
		       strerror(errno));
		return -1;
	}
	ret = mon_read(fd, buf, sizeof(buf));
	mon_print(g, tag, buf, cmd);
	if (ret)
		printf("l2mon: guest %d: %s: no answer to \"%s\" in 5 s\n", g, tag, cmd);
	return ret;
}

/* Where guest @g's vCPU is, from its monitor; -1 if that does not answer. */
static int mon_dump(int g)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char banner[1024];
	int fd, ret = -1;

	snprintf(sun.sun_path, sizeof(sun.sun_path), DIR "/mon-%d", g);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (void *)&sun, sizeof(sun))) {
		printf("l2mon: guest %d: regs: monitor %s: %s\n", g, sun.sun_path,
		       strerror(errno));
		goto out;
	}
	if (mon_read(fd, banner, sizeof(banner))) {
		printf("l2mon: guest %d: regs: no monitor prompt in 5 s\n", g);
		goto out;
	}
	/* The stack's words, for return addresses to look up in System.map. */
	if (!mon_cmd(g, fd, "info registers", "regs") &&
	    !mon_cmd(g, fd, "x/6i $pc", "code") &&
	    !mon_cmd(g, fd, "x/48gx $sp", "stack"))
		ret = 0;
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

/*
 * The registers and code of every guest not in @state, twice, 2 s apart:
 * does RIP move? A monitor that did not answer the first time is stuck
 * and not asked again.
 */
static void mon_dump_all(int state)
{
	int stuck[MAX_GUESTS] = { 0 };
	int k, i;

	for (k = 1; k <= 2; k++) {
		if (k > 1)
			sleep(2);
		for (i = 0; i < nguests; i++) {
			if (guests[i].state == state || guests[i].lost || guests[i].pid <= 0 ||
			    stuck[i])
				continue;
			printf("l2mon: guest %d: monitor, sample %d of 2:\n", i, k);
			stuck[i] = mon_dump(i);
		}
	}
}

static void wait_all(int state, int timeout_s, const char *what)
{
	uint64_t end = mono_ns() + timeout_s * 1000000000ull;
	int i, left;

	for (;;) {
		for (left = 0, i = 0; i < nguests; i++)
			left += !guests[i].lost && guests[i].state != state;
		if (!left)
			return;
		if (mono_ns() > end) {
			char why[64];

			printf("l2mon: %d of %d guests not %s after %d s, asking their monitors\n",
			       left, nguests, what, timeout_s);
			mon_dump_all(state);
			snprintf(why, sizeof(why), "not %s after %d s", what, timeout_s);
			for (i = 0; i < nguests; i++)
				if (!guests[i].lost && guests[i].state != state)
					lose(i, why);
			return;
		}
		pump(1000);
	}
}

static void say(int g, const char *s)
{
	size_t n = strlen(s);

	if (guests[g].lost)
		return;
	if (write(guests[g].in, s, n) != (ssize_t)n)
		lose(g, "console write failed");
}

static void start(int g, char **qemu, const char *kernel, const char *initrd,
		  int mib)
{
	char mem[16], disk[96], drive[160], net[128], mac[64], append[128];
	char mon[128];
	int in[2], out[2], fd;
	char *argv[64];
	int n = 0;

	snprintf(disk, sizeof(disk), DIR "/disk-%d", g);
	fd = open(disk, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 64 << 20))
		die("%s: %s", disk, strerror(errno));
	close(fd);
	snprintf(mem, sizeof(mem), "%d", mib);
	snprintf(drive, sizeof(drive), "file=%s,format=raw,if=none,id=d0", disk);
	snprintf(net, sizeof(net),
		 "socket,id=n0,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d",
		 SINK_PORT, SINK_PORT + 1 + g);
	snprintf(mac, sizeof(mac), "virtio-net-device,netdev=n0,mac=52:54:00:12:34:%02x", g);
	snprintf(append, sizeof(append), "console=ttyS0 quiet asi=off l2.id=%d", g);
	snprintf(mon, sizeof(mon), "unix:" DIR "/mon-%d,server=on,wait=off", g);

	while (*qemu && n < 40)
		argv[n++] = *qemu++;
	argv[n++] = "-m";
	argv[n++] = mem;
	argv[n++] = "-kernel";
	argv[n++] = (char *)kernel;
	argv[n++] = "-initrd";
	argv[n++] = (char *)initrd;
	argv[n++] = "-append";
	argv[n++] = append;
	argv[n++] = "-serial";
	argv[n++] = "stdio";
	argv[n++] = "-monitor";
	argv[n++] = mon;
	argv[n++] = "-drive";
	argv[n++] = drive;
	argv[n++] = "-device";
	argv[n++] = "virtio-blk-device,drive=d0";
	argv[n++] = "-netdev";
	argv[n++] = net;
	argv[n++] = "-device";
	argv[n++] = mac;
	argv[n] = NULL;
	if (g == 0) {
		int i;

		printf("l2mon: guest command:");
		for (i = 0; i < n; i++)
			printf(" %s", argv[i]);
		printf("\n");
	}

	if (pipe(in) || pipe(out))
		die("pipe: %s", strerror(errno));
	guests[g].pid = fork();
	if (guests[g].pid < 0)
		die("fork: %s", strerror(errno));
	if (!guests[g].pid) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(out[1], 2);
		close(in[0]); close(in[1]); close(out[0]); close(out[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "l2mon: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	guests[g].in = in[1];
	guests[g].out = out[0];
}

/*
 * perf stat over each phase, as a user compares asi=on with asi=off: the
 * task-clock of every live QEMU process (all threads, those QEMU starts
 * during the phase included: perf's counters are inherited) and, where
 * the kernel has them, the asi:* tracepoints those tasks hit. perf starts
 * with its counters disabled (--delay=-1) and is enabled and disabled
 * through its control pipe, each command acknowledged, so that what it
 * counts is the phase. No perf, or a perf that fails: the phase's line
 * goes without the perf_* fields.
 */
struct perf_run {
	pid_t pid;
	int ctl, ack;
	char path[96];
};

static int perf_avail;			/* /usr/bin/perf runs */
static int perf_asi;			/* and the asi:* tracepoints exist */

static int perf_cmd(struct perf_run *pr, const char *cmd)
{
	struct pollfd p = { .fd = pr->ack, .events = POLLIN };
	char buf[16] = "";
	size_t n = strlen(cmd);

	if (write(pr->ctl, cmd, n) != (ssize_t)n || poll(&p, 1, 10000) != 1 ||
	    read(pr->ack, buf, sizeof(buf) - 1) <= 0 || strncmp(buf, "ack", 3))
		return -1;
	return 0;
}

static void perf_end(struct perf_run *pr)
{
	int status;

	if (pr->pid <= 0)
		return;
	kill(pr->pid, SIGINT);
	waitpid(pr->pid, &status, 0);
	close(pr->ctl);
	close(pr->ack);
	pr->pid = -1;
}

static int perf_start(struct perf_run *pr, const char *phase)
{
	char pids[MAX_GUESTS * 12] = "", ctl[48];
	int c[2], a[2], g, n = 0;

	pr->pid = -1;
	if (!perf_avail)
		return -1;
	for (g = 0; g < nguests; g++)
		if (!guests[g].lost)
			n += snprintf(pids + n, sizeof(pids) - n, "%s%d", n ? "," : "",
				      guests[g].pid);
	if (pipe(c) || pipe(a))
		return -1;
	snprintf(pr->path, sizeof(pr->path), DIR "/perf-%s.csv", phase);
	snprintf(ctl, sizeof(ctl), "fd:%d,%d", c[0], a[1]);
	pr->pid = fork();
	if (!pr->pid) {
		char *argv[] = { "perf", "stat", "-x", ",", "-o", pr->path, "--control", ctl,
				 "--delay=-1", "-e", "task-clock", "-e", "asi:asi_enter",
				 "-e", "asi:asi_exit", "-e", "asi:asi_fault", "-p", pids, NULL };
		int fd = open("/dev/null", O_WRONLY);

		close(c[1]);
		close(a[0]);
		dup2(fd, 1);
		dup2(fd, 2);
		if (!perf_asi)	/* task-clock only */
			memmove(&argv[11], &argv[17], 3 * sizeof(argv[0]));
		execvp("perf", argv);
		_exit(127);
	}
	close(c[0]);
	close(a[1]);
	pr->ctl = c[1];
	pr->ack = a[0];
	if (pr->pid < 0 || perf_cmd(pr, "enable\n")) {
		printf("l2mon: perf stat did not start for phase %s: no perf_* fields\n", phase);
		perf_end(pr);
		return -1;
	}
	return 0;
}

/* Stop counting; " perf_ms=... perf_enters=..." from perf's file into @out. */
static void perf_collect(struct perf_run *pr, char *out, size_t len)
{
	static const char *const ev[][2] = {
		{ "task-clock", "perf_ms" }, { "asi:asi_enter", "perf_enters" },
		{ "asi:asi_exit", "perf_exits" }, { "asi:asi_fault", "perf_faults" },
	};
	char line[512];
	size_t n = 0;
	FILE *f;

	*out = 0;
	if (pr->pid <= 0)
		return;
	if (perf_cmd(pr, "disable\n"))
		printf("l2mon: perf stat: no ack to disable\n");
	perf_end(pr);
	f = fopen(pr->path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *val = strtok(line, ","), *unit, *name;
		size_t i;

		if (!val || !(unit = strtok(NULL, ",")))
			continue;
		/* An empty unit: strtok() skipped it, the name came instead. */
		name = strchr(unit, ':') || !strcmp(unit, "task-clock") ? unit : strtok(NULL, ",");
		for (i = 0; name && i < sizeof(ev) / sizeof(ev[0]); i++)
			if (!strcmp(name, ev[i][0]) && (*val >= '0' && *val <= '9') &&
			    n < len)
				n += snprintf(out + n, len - n, " %s=%s", ev[i][1], val);
	}
	fclose(f);
}

static void usage(void)
{
	fprintf(stderr, "usage: l2mon -n GUESTS -k KERNEL -i INITRD [-m MiB] [-t SECONDS]\n"
			"             -P NAME:L2IO-ARGS [-P ...] -- QEMU [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *kernel = NULL, *initrd = NULL;
	char *phase[MAX_PHASES];
	int nphases = 0, mib = 96, timeout = 900, opt, g, p;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(SINK_PORT),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rcvbuf = 4 << 20;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "n:k:i:m:t:P:")) != -1) {
		switch (opt) {
		case 'n': nguests = atoi(optarg); break;
		case 'k': kernel = optarg; break;
		case 'i': initrd = optarg; break;
		case 'm': mib = atoi(optarg); break;
		case 't': timeout = atoi(optarg); break;
		case 'P':
			if (nphases == MAX_PHASES || !strchr(optarg, ':'))
				usage();
			phase[nphases++] = optarg;
			break;
		default: usage();
		}
	}
	if (nguests < 1 || nguests > MAX_GUESTS || !kernel || !initrd ||
	    !nphases || optind >= argc || mib < 32 || timeout < 1)
		usage();

	signal(SIGPIPE, SIG_IGN);
	mkdir(DIR, 0700);
	sink = socket(AF_INET, SOCK_DGRAM, 0);
	if (sink < 0 || setsockopt(sink, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) ||
	    bind(sink, (void *)&sin, sizeof(sin)))
		die("sink socket on 127.0.0.1:%d: %s (is lo up?)", SINK_PORT, strerror(errno));

	uint64_t t0 = mono_ns();

	perf_avail = !getenv("L2_NO_PERF") && !system("perf --version >/dev/null 2>&1");
	perf_asi = !access("/sys/kernel/tracing/events/asi/asi_enter", F_OK) ||
		   !access("/sys/kernel/debug/tracing/events/asi/asi_enter", F_OK);

	for (g = 0; g < nguests; g++)
		start(g, argv + optind, kernel, initrd, mib);
	wait_all(1, timeout, "ready");
	printf("l2mon: %d guests ready in %.1f s\n", nguests - nlost, (mono_ns() - t0) / 1e9);

	for (p = 0; p < nphases; p++) {
		char *colon = strchr(phase[p], ':'), cmd[512], name[64];
		uint64_t s0[NSTATS], s1[NSTATS], c0, c1, w0, w1, l2max = 0;
		struct perf_run pr;
		char perf[160];
		int lost0 = nlost;
		long ops = 0, f0;
		size_t i;

		snprintf(name, sizeof(name), "%.*s", (int)(colon - phase[p]), phase[p]);
		snprintf(cmd, sizeof(cmd), "run %s %s\n", name, colon + 1);
		pump(0);
		f0 = frames;
		read_stats(s0);
		perf_start(&pr, name);
		w0 = mono_ns();
		c0 = qemu_cpu_ns();
		for (g = 0; g < nguests; g++) {
			guests[g].state = 2;
			say(g, cmd);
		}
		wait_all(1, timeout, "done");
		c1 = qemu_cpu_ns();
		w1 = mono_ns();
		read_stats(s1);
		perf_collect(&pr, perf, sizeof(perf));
		pump(100);	/* frames still in flight */
		if (nlost != lost0) {
			/* A lost guest's CPU time left the sum mid-phase. */
			printf("l2mon: phase %s: no sample (%d guests lost in it)\n", name,
			       nlost - lost0);
			continue;
		}
		for (g = 0; g < nguests; g++) {
			if (guests[g].lost)
				continue;
			ops += guests[g].ops;
			if (guests[g].l2_ns > l2max)
				l2max = guests[g].l2_ns;
		}
		printf("bench: l2-%d-%s ns=%.0f cpu_ms=%.1f wall_ms=%.1f ops=%ld",
		       nguests, name, (double)(c1 - c0) / ops, (c1 - c0) / 1e6,
		       (w1 - w0) / 1e6, ops);
		for (i = 0; i < NSTATS; i++)
			printf(" %s=%llu", stats[i].key, (unsigned long long)(s1[i] - s0[i]));
		printf("%s guests=%d frames=%ld l2_ms=%.1f\n", perf, nguests - nlost,
		       frames - f0, l2max / 1e6);
	}
	for (g = 0; g < nguests; g++)
		say(g, "quit\n");
	/* A guest that does not power off within 60 s is killed. */
	for (g = 0; g < nguests; g++) {
		uint64_t end = mono_ns() + 60 * 1000000000ull;
		int status = 0;
		pid_t r;

		if (guests[g].lost)
			continue;
		while (!(r = waitpid(guests[g].pid, &status, WNOHANG)) && mono_ns() < end)
			usleep(100000);
		if (!r) {
			printf("l2mon: guest %d: no power-off after 60 s, killed\n", g);
			kill(guests[g].pid, SIGKILL);
			waitpid(guests[g].pid, &status, 0);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("l2mon: guest %d: QEMU exit status %#x\n", g, status);
		}
	}
	if (nlost)
		printf("l2mon: %d of %d guests lost\n", nlost, nguests);
	return nlost ? 1 : 0;
}

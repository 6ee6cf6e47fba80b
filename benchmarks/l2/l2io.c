// SPDX-License-Identifier: GPL-2.0
/*
 * l2io: the workload of one L2 guest phase (benchmarks/l2).
 *
 *   l2io read|write|randread|randwrite DEVICE BLOCK-SIZE COUNT
 *   l2io send IPV4 PORT PAYLOAD-SIZE COUNT
 *   l2io spin MILLIONS
 *   l2io touch
 *
 * Disk phases use O_DIRECT so that every block is a virtio-blk request and
 * none is served from L2's page cache; random offsets come from a fixed
 * LCG so every run does the same requests. "send" sends UDP datagrams
 * through L2's network device (to a broadcast address: no neighbour to
 * resolve, every datagram leaves as it is sent). "spin" is a CPU loop with no exits, the
 * control. "touch" writes every page of what L2 has free (MemAvailable
 * less 8 MiB) once and frees it again: the warm-up, after which L2's
 * memory is in the host's nested page tables and the phases see the
 * steady state rather than the first touch of each page. Prints "ops=N errors=E ns=T" (T: L2's own monotonic time) and
 * exits non-zero if any operation failed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static long arg(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || v <= 0) {
		fprintf(stderr, "l2io: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static int disk(const char *mode, const char *dev, long bs, long count,
		long *errors)
{
	int write = strstr(mode, "write") != NULL;
	int rnd = !strncmp(mode, "rand", 4);
	uint64_t lcg = 0x2545f4914f6cdd1dull, blocks;
	off_t size;
	void *buf;
	long i;
	int fd;

	fd = open(dev, (write ? O_RDWR : O_RDONLY) | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "l2io: %s: %s\n", dev, strerror(errno));
		return -1;
	}
	size = lseek(fd, 0, SEEK_END);
	blocks = size / bs;
	if (size <= 0 || (!rnd && (uint64_t)count > blocks)) {
		fprintf(stderr, "l2io: %s: %lld bytes, too small for %ld blocks of %ld\n",
			dev, (long long)size, count, bs);
		return -1;
	}
	if (posix_memalign(&buf, 4096, bs))
		return -1;
	memset(buf, 0x5a, bs);
	for (i = 0; i < count; i++) {
		off_t off = i * bs;
		ssize_t n;

		if (rnd) {
			lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
			off = ((lcg >> 17) % blocks) * bs;
		}
		n = write ? pwrite(fd, buf, bs, off) : pread(fd, buf, bs, off);
		if (n != bs)
			(*errors)++;
	}
	if (write && fsync(fd))
		(*errors)++;
	free(buf);
	close(fd);
	return 0;
}

static int send_udp(const char *ip, long port, long size, long count,
		    long *errors)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	char *buf = calloc(1, size);
	int sndbuf = 8 * size, one = 1;
	long i;
	int fd;

	if (!buf || inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
		fprintf(stderr, "l2io: bad address '%s'\n", ip);
		return -1;
	}
	/*
	 * A send buffer of a few datagrams makes sendto() wait for the device
	 * to complete what it has, instead of overflowing the queue in front
	 * of it, where datagrams would be dropped without an error.
	 */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) ||
	    setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)))
		return -1;
	for (i = 0; i < count; i++) {
		memcpy(buf, &i, sizeof(i));
		if (sendto(fd, buf, size, 0, (void *)&sin, sizeof(sin)) != size)
			(*errors)++;
	}
	close(fd);
	free(buf);
	return 0;
}

/* Write every page of L2's available memory once; returns the pages. */
static long touch(long *errors)
{
	long kib = 0, pages, i;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "r");
	char *p;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	pages = (kib - 8192) / 4;
	if (pages <= 0) {
		fprintf(stderr, "l2io: MemAvailable %ld kB: nothing to touch\n", kib);
		(*errors)++;
		return 0;
	}
	p = malloc(pages * 4096);
	if (!p) {
		(*errors)++;
		return 0;
	}
	for (i = 0; i < pages; i++)
		p[i * 4096] = 1;
	free(p);
	return pages;
}

int main(int argc, char **argv)
{
	long ops = 0, errors = 0;
	uint64_t t0 = now_ns();
	int ret = -1;

	if (argc == 5 && (!strcmp(argv[1], "read") || !strcmp(argv[1], "write") ||
			  !strcmp(argv[1], "randread") || !strcmp(argv[1], "randwrite"))) {
		ops = arg(argv[4], "count");
		ret = disk(argv[1], argv[2], arg(argv[3], "block size"), ops, &errors);
	} else if (argc == 6 && !strcmp(argv[1], "send")) {
		ops = arg(argv[5], "count");
		ret = send_udp(argv[2], arg(argv[3], "port"), arg(argv[4], "size"),
			       ops, &errors);
	} else if (argc == 3 && !strcmp(argv[1], "spin")) {
		volatile uint64_t x = 0;
		long i;

		ops = arg(argv[2], "count");
		for (i = 0; i < ops * 1000000; i++)
			x += i;
		ret = 0;
	} else if (argc == 2 && !strcmp(argv[1], "touch")) {
		ops = touch(&errors);
		ret = 0;
	} else {
		fprintf(stderr, "usage: l2io read|write|randread|randwrite DEVICE BS COUNT\n"
				"       l2io send IPV4 PORT SIZE COUNT\n"
				"       l2io spin MILLIONS\n"
				"       l2io touch\n");
		return 2;
	}
	printf("ops=%ld errors=%ld ns=%llu\n", ops, errors,
	       (unsigned long long)(now_ns() - t0));
	return ret || errors;
}

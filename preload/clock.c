/*
 * Clock selection.  CPUID leaf 0x80000007 EDX bit 8 is the invariant-TSC
 * bit; without it TSC ticks may change rate or stop, so we fall back to the
 * vDSO's CLOCK_MONOTONIC.
 */
#include <cpuid.h>

#include "clock.h"
#include "wire.h"

int clock_use_tsc;

int clock_init(void)
{
	unsigned int eax, ebx, ecx, edx;

	clock_use_tsc = __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) &&
			(edx & (1u << 8));
	return clock_use_tsc ? SHM_CLOCK_TSC : SHM_CLOCK_MONOTONIC;
}

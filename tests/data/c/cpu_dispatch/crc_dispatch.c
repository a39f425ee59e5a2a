/* Runtime CPU dispatch as xz-utils' crc64_fast.c and nettle's nettle-benchmark.c do it: inline assembly
 * (cpuid) picks between a portable function and one compiled for extra target features. Before the service
 * initialized LLVM's x86 asm parser, emitting an object for such a unit aborted the compiler worker. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>

static int has_pclmul_and_sse41(void)
{
	uint32_t eax = 1, ebx, ecx = 0, edx;
	__asm__("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
	return (ecx >> 1 & 1) && (ecx >> 19 & 1); /* PCLMULQDQ and SSE4.1 */
}

/* The low 64 bits of the carry-less product of a and b. */
static uint64_t clmul_portable(uint64_t a, uint64_t b)
{
	uint64_t product = 0;
	for (int bit = 0; bit < 64; bit++)
		if (b >> bit & 1)
			product ^= a << bit;
	return product;
}

__attribute__((__target__("ssse3,sse4.1,pclmul")))
static uint64_t clmul_pclmul(uint64_t a, uint64_t b)
{
	__m128i product = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)a),
					       _mm_cvtsi64_si128((long long)b), 0x00);
	return (uint64_t)_mm_extract_epi64(_mm_unpacklo_epi64(product, product), 0);
}

static uint64_t fold(const uint64_t *words, int n, uint64_t (*clmul)(uint64_t, uint64_t))
{
	uint64_t state = 0x42f0e1eba9ea3693u;
	for (int i = 0; i < n; i++)
		state = clmul(state ^ words[i], 0x9a6c9329ac4bc9b5u) ^ (state >> 7);
	return state;
}

int main(void)
{
	uint64_t words[64];
	for (int i = 0; i < 64; i++)
		words[i] = (uint64_t)i * 0x9e3779b97f4a7c15u;
	uint64_t portable = fold(words, 64, clmul_portable);
	uint64_t dispatched = has_pclmul_and_sse41() ? fold(words, 64, clmul_pclmul) : portable;
	printf("fold %016llx %s\n", (unsigned long long)portable, dispatched == portable ? "agrees" : "DIFFERS");
	return dispatched != portable;
}

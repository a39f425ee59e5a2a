/* The same clamp as sum.c (a duplicate after normalization), and string helpers. */
static int clamp(int x, int lo, int hi) {
  if (x < lo)
    return lo;
  if (x > hi)
    return hi;
  return x;
}

unsigned length(const char *s) {
  unsigned n = 0;
  while (s[n])
    n++;
  return n;
}

int count_char(const char *s, char c) {
  int n = 0;
  for (; *s; s++)
    if (*s == c)
      n++;
  return clamp(n, 0, 1000);
}

/* Sums and a trivial function. */
int sum(const int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}

void nothing(void) {}

static int clamp(int x, int lo, int hi) {
  if (x < lo)
    return lo;
  if (x > hi)
    return hi;
  return x;
}

int clamped_sum(const int *a, int n) { return clamp(sum(a, n), -100, 100); }

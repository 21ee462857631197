struct Moments {
  float n, mean, m2;
};
__device__ __forceinline__ Moments merge(Moments a, Moments b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean;
  const float fb = b.n / n;
  return Moments{n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

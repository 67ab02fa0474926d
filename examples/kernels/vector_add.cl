// c = a + b, one element per work-item; block_size_x is a tuning parameter, defined
// (with grid_size_x) by the tuner: mapper tune, or Kernel Tuner's tune_kernel.
__kernel void vector_add(__global float *c, __global const float *a,
                         __global const float *b, int n) {
    int i = get_group_id(0) * block_size_x + get_local_id(0);
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

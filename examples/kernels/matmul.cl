// C = A B for n x n row-major matrices, tiled for registers: a work-group of
// block_size_x x block_size_y work-items computes a (block_size_x * tile_size_x) x
// (block_size_y * tile_size_y) tile of C, each work-item tile_size_x x tile_size_y
// elements strided by the block size (neighbouring work-items read neighbouring
// columns of B). The tuning parameters are defined by the tuner (-D); with Kernel
// Tuner's grid divisors grid_div_x = [block_size_x, tile_size_x] (y alike) the grid
// covers n x n.
__kernel void matmul(__global float *C, __global const float *A,
                     __global const float *B, int n) {
    const int x0 = get_group_id(0) * block_size_x * tile_size_x + get_local_id(0);
    const int y0 = get_group_id(1) * block_size_y * tile_size_y + get_local_id(1);
    float acc[tile_size_y][tile_size_x];
    for (int ty = 0; ty < tile_size_y; ty++)
        for (int tx = 0; tx < tile_size_x; tx++)
            acc[ty][tx] = 0.0f;
    for (int k = 0; k < n; k++) {
        float b[tile_size_x];
        for (int tx = 0; tx < tile_size_x; tx++) {
            int x = x0 + tx * block_size_x;
            b[tx] = x < n ? B[k * n + x] : 0.0f;
        }
        for (int ty = 0; ty < tile_size_y; ty++) {
            int y = y0 + ty * block_size_y;
            float a = y < n ? A[y * n + k] : 0.0f;
            for (int tx = 0; tx < tile_size_x; tx++)
                acc[ty][tx] += a * b[tx];
        }
    }
    for (int ty = 0; ty < tile_size_y; ty++) {
        int y = y0 + ty * block_size_y;
        for (int tx = 0; tx < tile_size_x; tx++) {
            int x = x0 + tx * block_size_x;
            if (x < n && y < n)
                C[y * n + x] = acc[ty][tx];
        }
    }
}

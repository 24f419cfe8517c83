// Tensor-core rung 6 — tc05 with persistent blocks (sm_90a, BF16): the same kernel, launched as one block per SM
// (kernels/cupy/tma.py), each looping over the tiles blockIdx.x, blockIdx.x + gridDim.x, … in the grouped order.
//  * The producer goes on to the next tile's stages as soon as the consumers release them, so the loads of tile i + 1
//    overlap the consumers' stores of tile i; with a block per tile, a new block's first loads start only after an
//    old block has stored everything and left the SM.
//  * The barriers are set up once per SM, not once per tile.
#include "tc05_tma.cu"

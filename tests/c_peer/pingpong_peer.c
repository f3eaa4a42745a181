/* An Intel MPI Benchmarks style PingPong between ranks 0 and 1, written
 * independently of himeno, for scripts/bench-pingpong.sh to hold
 * `himeno bench pingpong` against.
 *
 * usage: pingpong_peer BYTES [imb|single]
 *   imb     separate send and receive buffers, page-aligned, every page
 *           written first (as IMB keeps them);
 *   single  one buffer of 64 MiB fresh from calloc, never written, used
 *           for both directions (as himeno's bench had it).
 * Prints "BYTES REPS one-way-microseconds" on rank 0: 1000 round trips
 * after one untimed one, half the mean round trip. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: pingpong_peer BYTES [imb|single]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t n = strtoull(argv[1], NULL, 10);
    int single = argc > 2 && strcmp(argv[2], "single") == 0;
    char *send, *recv;
    if (single) {
        send = recv = calloc(n > (64u << 20) ? n : (64u << 20), 1);
    } else {
        if (posix_memalign((void **)&send, 4096, n ? n : 1) || posix_memalign((void **)&recv, 4096, n ? n : 1)) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        memset(send, 1, n);
        memset(recv, 1, n);
    }
    if (!send) MPI_Abort(MPI_COMM_WORLD, 2);
    const int reps = 1000;
    double t = 0;
    for (int i = -1; i < reps; i++) {
        if (i == 0) t = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(send, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(recv, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(recv, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(send, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    t = MPI_Wtime() - t;
    if (rank == 0) printf("%zu %d %.3f\n", n, reps, t / reps / 2 * 1e6);
    MPI_Finalize();
    return 0;
}

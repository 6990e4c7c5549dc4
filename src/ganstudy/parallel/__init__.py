"""Process layout: MPI world, threads per rank."""

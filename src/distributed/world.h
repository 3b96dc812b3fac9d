// The ranks of one job: the processes an MPI launcher started together (mpirun -np N tensormorph …,
// srun), or this process alone. Messages are tagged byte strings between ranks; the protocol that
// gives tags and bytes a meaning belongs to whoever uses them (index/distributed_indexer.h).
//
// Only the thread that called init() talks to MPI (MPI_THREAD_FUNNELED): worker threads compute, the
// main thread sends and polls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmorph {

// Tags every protocol shares: rank 0 ends the other ranks' service with the job's exit code (an int32).
// Protocols number their own tags from 16 (indexing) and 32 (4D-STEM products) up.
constexpr int kTagEndOfService = 1;

struct RankMessage {
  int source = 0, tag = 0;
  std::vector<uint8_t> bytes;
};

class World {
 public:
  // The process's one world.
  static World& instance();

  // Joins the MPI job when this process was started by an MPI launcher (the environment names a
  // world size: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE); otherwise, and in a build without MPI, the
  // world is this process alone and MPI is never initialised (a plain run pays nothing for it).
  // Throws Error(Io) when the launcher's environment is there but MPI cannot start.
  void init(int* argc, char*** argv);
  // Leaves the job (every rank calls it once, at exit). Safe without init().
  void finalize();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  // Whether this build can join an MPI job at all.
  static bool built_with_mpi();
  // The launcher's environment says this process is one of several (even when MPI is absent).
  static bool launched_by_mpi();
  // This rank's host name (MPI_Get_processor_name, or gethostname).
  std::string host() const;

  // Sends `bytes` to rank `dest` (blocking until the buffer may be reused). Throws Error(Io) naming both
  // ranks when MPI reports a failure, Error(InvalidArgument) for a message over 2 GiB - 1 (MPI counts
  // are int).
  void send(int dest, int tag, const std::vector<uint8_t>& bytes);
  // The next message from any rank when one has arrived (false: none yet).
  bool poll(RankMessage& out);
  // Waits for the next message from `source`.
  RankMessage receive(int source);
  // Rank 0: ends every other rank's service with the job's exit code (kTagEndOfService).
  void end_service(int code);
  // The exit code an end-of-service message carries.
  static int end_of_service_code(const RankMessage& m);
  // Ends every rank of the job with `code` (MPI_Abort); in a one-process world, exits.
  [[noreturn]] void abort(int code);

 private:
  int rank_ = 0, size_ = 1;
  bool mpi_ = false, finalized_ = false;
};

}  // namespace tmorph

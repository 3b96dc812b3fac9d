#include "distributed/world.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "distributed/wire.h"
#include "tensormorph/error.h"

#ifdef TM_HAVE_MPI
#include <mpi.h>
#endif

namespace tmorph {

World& World::instance() {
  static World world;
  return world;
}

bool World::built_with_mpi() {
#ifdef TM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool World::launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

void World::end_service(int code) {
  WireWriter w;
  w.put(static_cast<int32_t>(code));
  for (int r = 1; r < size_; ++r) send(r, kTagEndOfService, w.bytes());
}

int World::end_of_service_code(const RankMessage& m) {
  WireReader in(m.bytes, "end of service from rank 0");
  const int code = in.get<int32_t>();
  in.expect_end();
  return code;
}

#ifdef TM_HAVE_MPI

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void check(int code, const std::string& what) {
  if (code != MPI_SUCCESS) throw Error(ErrorKind::Io, what + ": " + mpi_error_text(code));
}

}  // namespace

void World::init(int* argc, char*** argv) {
  if (mpi_ || !launched_by_mpi()) return;
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  mpi_ = true;
  // Errors come back as codes (thrown as Error naming the ranks), not as MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

void World::finalize() {
  if (!mpi_ || finalized_) return;
  finalized_ = true;
  MPI_Finalize();
}

std::string World::host() const {
  if (mpi_) {
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    if (MPI_Get_processor_name(name, &length) == MPI_SUCCESS) return std::string(name, static_cast<size_t>(length));
  }
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

void World::send(int dest, int tag, const std::vector<uint8_t>& bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw Error(ErrorKind::InvalidArgument, "a message of " + std::to_string(bytes.size()) + " bytes from rank " +
                                                std::to_string(rank_) + " to rank " + std::to_string(dest) +
                                                " exceeds MPI's limit of 2 GiB - 1 per message");
  if (!mpi_) throw Error(ErrorKind::InvalidArgument, "no other rank to send to: this process is not part of an MPI job");
  check(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag, MPI_COMM_WORLD),
        "sending " + std::to_string(bytes.size()) + " bytes from rank " + std::to_string(rank_) + " to rank " + std::to_string(dest));
}

namespace {

RankMessage receive_probed(const MPI_Status& status) {
  RankMessage m;
  m.source = status.MPI_SOURCE;
  m.tag = status.MPI_TAG;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  m.bytes.resize(static_cast<size_t>(count));
  check(MPI_Recv(m.bytes.data(), count, MPI_BYTE, m.source, m.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "receiving " + std::to_string(count) + " bytes from rank " + std::to_string(m.source));
  return m;
}

}  // namespace

bool World::poll(RankMessage& out) {
  if (!mpi_) return false;
  int flag = 0;
  MPI_Status status;
  check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status), "polling for messages");
  if (!flag) return false;
  out = receive_probed(status);
  return true;
}

RankMessage World::receive(int source) {
  if (!mpi_) throw Error(ErrorKind::InvalidArgument, "no other rank to receive from: this process is not part of an MPI job");
  MPI_Status status;
  check(MPI_Probe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &status), "waiting for rank " + std::to_string(source));
  return receive_probed(status);
}

void World::abort(int code) {
  if (mpi_ && !finalized_) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // one process: no MPI in this build

void World::init(int*, char***) {}
void World::finalize() {}

std::string World::host() const {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

void World::send(int, int, const std::vector<uint8_t>&) {
  throw Error(ErrorKind::InvalidArgument, "this build has no MPI: there is no other rank to send to");
}
bool World::poll(RankMessage&) { return false; }
RankMessage World::receive(int) {
  throw Error(ErrorKind::InvalidArgument, "this build has no MPI: there is no other rank to receive from");
}
void World::abort(int code) { std::_Exit(code); }

#endif

}  // namespace tmorph

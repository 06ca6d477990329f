// jrpc-peer-jsonrpccpp — libjson-rpc-cpp's HTTP server (libmicrohttpd) with
// one method, `add`, by position: the same job as jrpc's demo worker.
//
//   jrpc-peer-jsonrpccpp PORT [THREADS]
//
// libjson-rpc-cpp 0.7 cannot choose the address it binds (all interfaces):
// bench/peers/run.sh runs it in a private network namespace.
#include <jsonrpccpp/server.h>
#include <jsonrpccpp/server/connectors/httpserver.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

using namespace jsonrpc;

class AddServer : public AbstractServer<AddServer> {
  public:
    explicit AddServer(AbstractServerConnector &conn) : AbstractServer<AddServer>(conn, JSONRPC_SERVER_V2)
    {
        bindAndAddMethod(Procedure("add", PARAMS_BY_POSITION, JSON_INTEGER, "a", JSON_INTEGER, "b",
                                   JSON_INTEGER, NULL),
                         &AddServer::add);
    }
    void add(const Json::Value &req, Json::Value &resp) { resp = req[0].asInt() + req[1].asInt(); }
};

static volatile sig_atomic_t stop;
static void on_signal(int) { stop = 1; }

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: jrpc-peer-jsonrpccpp PORT [THREADS]\n");
        return 2;
    }
    HttpServer http(atoi(argv[1]), "", "", argc == 3 ? atoi(argv[2]) : 50);
    AddServer server(http);
    if (!server.StartListening()) {
        fprintf(stderr, "jrpc-peer-jsonrpccpp: cannot listen on port %s\n", argv[1]);
        return 1;
    }
    fprintf(stderr, "jrpc-peer-jsonrpccpp: listening on port %s\n", argv[1]);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stop)
        pause();
    server.StopListening();
    return 0;
}

"""An HTTPS proxy for tests that terminates TLS with certificates of its own CA.

Programs that reach a service only by its public host name (no endpoint setting) but honour
HTTPS_PROXY and SSL_CERT_FILE are sent to a server on loopback instead: every CONNECT is
answered, TLS is terminated with a certificate for the host asked for (made on first use with
openssl, signed by the CA in DIR), and the plain bytes go to UPSTREAM unchanged (Host header
included). Standard library only.

usage: tls_proxy.py DIR UPSTREAM_HOST UPSTREAM_PORT
DIR holds ca.pem and ca.key; the proxy writes leaf.key and a certificate per host there, and
prints "listening on PORT" once it accepts connections.
"""

import os
import select
import socket
import ssl
import subprocess
import sys
import threading

directory, upstream_host, upstream_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
contexts = {}
lock = threading.Lock()


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def context_for(host):
    """A server context with a certificate for host, made once."""
    with lock:
        if host in contexts:
            return contexts[host]
        key = os.path.join(directory, "leaf.key")
        if not os.path.exists(key):
            openssl("genrsa", "-out", key, "2048")
        safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)
        csr = os.path.join(directory, safe + ".csr")
        cert = os.path.join(directory, safe + ".pem")
        ext = os.path.join(directory, safe + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n" % host)
        # The name goes in subjectAltName alone: a common name holds 64 characters at most.
        openssl("req", "-new", "-key", key, "-subj", "/CN=tls-proxy", "-out", csr)
        openssl("x509", "-req", "-in", csr, "-CA", os.path.join(directory, "ca.pem"),
                "-CAkey", os.path.join(directory, "ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", ext, "-out", cert)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        contexts[host] = context
        return context


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def relay(tls, up):
    """Both ways until either side closes; one thread, so the TLS socket is never shared."""
    sockets = [tls, up]
    while True:
        readable = [tls] if tls.pending() else []
        if not readable:
            readable, _, _ = select.select(sockets, [], [], 300)
            if not readable:
                return
        for sock in readable:
            try:
                data = sock.recv(65536)
            except ssl.SSLWantReadError:
                continue
            if not data:
                return
            (up if sock is tls else tls).sendall(data)


def handle(conn):
    head = None
    try:
        head, _ = read_head(conn)
        if head is None:
            return
        method, target = head.split(" ")[:2]
        if method != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        host = target.rsplit(":", 1)[0]
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        tls = context_for(host).wrap_socket(conn, server_side=True)
        up = socket.create_connection((upstream_host, upstream_port))
        try:
            relay(tls, up)
        finally:
            up.close()
    except Exception as error:  # one connection's failure is logged, never fatal
        print("connection for %r failed: %r" % (head, error), flush=True)
    finally:
        conn.close()


def main():
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    print("listening on %d" % server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


main()

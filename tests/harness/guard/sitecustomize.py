# Loaded by every Python process of a test run that could not get a loopback-only network
# namespace (see tests/harness/loopback-only): refuse connections to anything but loopback.
import ipaddress
import socket

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _check(address):
    if isinstance(address, tuple) and address:
        host = address[0]
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            infos = socket.getaddrinfo(host, None)
            ips = [ipaddress.ip_address(i[4][0]) for i in infos]
        else:
            ips = [ip]
        for ip in ips:
            if not ip.is_loopback:
                raise PermissionError(
                    "test isolation: connection to %s refused; tests talk only to loopback (the mock IMDS)" % host)


def connect(self, address):
    _check(address)
    return _connect(self, address)


def connect_ex(self, address):
    _check(address)
    return _connect_ex(self, address)


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex

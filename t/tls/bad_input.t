#!/usr/bin/env perl
# TLS bad input: a plain-text client on a TLS port, garbage and truncated
# handshakes, a client certificate from the wrong CA, no client certificate
# where one is required. Each closes only its own connection; a TLS client
# connected throughout keeps being served; connections are released.
# memcached counts in ssl_handshake_errors only failures its listener sees
# at accept time (rarely any); memcached-rdma counts every failed handshake
# (doc/compatibility.md), so the counter is checked for ours only.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep time);
use MCTest;
use MCTLS;
use IO::Socket::SSL qw(SSL_VERIFY_PEER);

my $ours = target() eq 'ours';
my $c = tls_certs();
my $srv = start_server(tls_server_args($c, 'ssl_verify_mode=2', "ssl_ca_cert=$c->{ca}"));
my $port = $srv->port;
my %good = (SSL_cert_file => $c->{client_crt}, SSL_key_file => $c->{client_key});

my $keep = tls_connect($port, %good) or BAIL_OUT("TLS connect: $MCTLS::error");
mc_is($keep, "set k 0 0 4\r\nkeep\r\n", "STORED\r\n", 'a client with a good certificate stores');
my $base = mc_stats($keep);

sub still_served {
    my $what = shift;
    mc_is($keep, "get k\r\n", "VALUE k 0 4\r\nkeep\r\nEND\r\n",
        "$what: the connected TLS client is still served");
    my $n = tls_connect($port, %good);
    ok($n, "$what: a new TLS client connects") or diag($MCTLS::error);
    mc_is($n, "get k\r\n", "VALUE k 0 4\r\nkeep\r\nEND\r\n", "$what: and is served") if $n;
    close $n if $n;
}

sub raw {
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 5)
      or die "connect: $!";
    binmode $s;
    return $s;
}

# 1. a plain-text client
my $p = raw();
mc_send($p, "version\r\n");
my $reply = mc_line($p, 5);
unlike($reply, qr/VERSION/, 'a plain-text client on a TLS port gets no reply in clear');
ok(mc_eof($p), '... and is disconnected');
still_served('plain text');

# 2. garbage in place of a ClientHello
$p = raw();
mc_send($p, join '', map { chr(($_ * 37 + 11) % 256) } 1 .. 2000);
ok(mc_eof($p), 'garbage bytes: disconnected');
still_served('garbage');

# 3. a handshake record cut short, then the client hangs up
$p = raw();
mc_send($p, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" . ("\x42" x 20));
close $p;
# 4. the same, but the client waits: the server must not hang on it
my $wait = raw();
mc_send($wait, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
still_served('truncated handshake');

# 5. a client certificate signed by another CA
my $wrong = tls_connect($port, SSL_cert_file => $c->{other_client_crt},
    SSL_key_file => $c->{other_client_key});
my $served = $wrong && mc_send($wrong, "get k\r\n") && mc_line($wrong, 5) =~ /^VALUE/;
ok(!$served, 'a certificate from the wrong CA is refused');
close $wrong if $wrong;
still_served('wrong CA');

# 6. no client certificate where one is required
my $none = tls_connect($port);
$served = $none && mc_send($none, "get k\r\n") && mc_line($none, 5) =~ /^VALUE/;
ok(!$served, 'no client certificate with ssl_verify_mode=2: refused');
close $none if $none;
still_served('no client certificate');

# 7. a server certificate the client does not trust: the client gives up
my $distrust = tls_connect($port, %good, SSL_verify_mode => SSL_VERIFY_PEER,
    SSL_ca_file => $c->{other_ca});
ok(!$distrust, 'a client that does not trust the server certificate fails its handshake');
my $trust = tls_connect($port, %good, SSL_verify_mode => SSL_VERIFY_PEER,
    SSL_ca_file => $c->{ca}, SSL_verifycn_name => 'localhost');
ok($trust, 'a client that trusts the CA verifies the server') or diag($MCTLS::error);
close $trust if $trust;
still_served('untrusted server certificate');
close $wait;

# every failed connection is released
my $now;
my $deadline = time + 5;
do { $now = mc_stats($keep); sleep 0.05 }
  while $now->{curr_connections} != $base->{curr_connections} && time < $deadline;
is($now->{curr_connections}, $base->{curr_connections},
    'curr_connections is back where it was: no connection left behind');
if ($ours) {
    # plain text, garbage, 2 truncated, wrong CA, no certificate, distrusting client
    is($now->{ssl_handshake_errors} - $base->{ssl_handshake_errors}, 7,
        'ssl_handshake_errors counts each failed handshake');
}
else {
    ok(defined $now->{ssl_handshake_errors}, 'memcached reports ssl_handshake_errors');
}
close $keep;
$srv->stop;
done_testing();

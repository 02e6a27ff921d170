#!/usr/bin/env perl
# TLS (-Z): text, meta and binary protocols over TLS, large values and
# pipelines (records split and joined), notls: listeners, the ssl_* stats
# and "stats settings", refresh_certs. Runs against memcached -Z too.
use strict;
use warnings;
use Test::More;
use MCTest;
use MCTLS;

my $c = tls_certs();
my $plain_port = free_port();
my $srv = start_server({ listen => 0 }, '-l', "127.0.0.1,notls:127.0.0.1:$plain_port",
    tls_server_args($c), '-m', '64', '-I', '2m');
my $port = $srv->port;

my $s = tls_connect($port) or BAIL_OUT("TLS connect: $MCTLS::error");
like($s->get_sslversion, qr/^TLSv1_[23]$/, 'negotiated TLS 1.2 or newer');
mc_is($s, "set a 5 0 3\r\nabc\r\n", "STORED\r\n", 'text set over TLS');
mc_is($s, "get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n", 'text get over TLS');
mc_is($s, "ms m 2 T0\r\nhi\r\n", "HD\r\n", 'meta set over TLS');
mc_is($s, "mg m v f\r\n", "VA 2 f0\r\nhi\r\n", 'meta get over TLS');

# a value larger than a TLS record, both ways
my $big = join '', map { chr(65 + $_ % 26) } 0 .. 1_500_000 - 1;
mc_is($s, "set big 0 0 " . length($big) . "\r\n$big\r\n", "STORED\r\n",
    '1.5 MB value sent over TLS');
mc_send($s, "get big\r\n");
my $head = "VALUE big 0 " . length($big) . "\r\n";
my $got = mc_bytes($s, length($head) + length($big) + 7, 15);
is(length $got, length($head) + length($big) + 7, '1.5 MB value read back in full');
ok($got eq "$head$big\r\nEND\r\n", '... byte for byte');

# 200 pipelined requests in one write: replies span many records
mc_send($s, join "", map {"set p$_ 0 0 3\r\n" . sprintf("%03d", $_) . "\r\n"} 10 .. 209);
my $replies = mc_bytes($s, 200 * length("STORED\r\n"), 10);
is($replies, "STORED\r\n" x 200, '200 pipelined sets answered in order');
mc_send($s, "get " . join(' ', map {"p$_"} 10 .. 209) . "\r\n");
my $values = mc_until($s, "END\r\n");
is(scalar(() = $values =~ /^VALUE p\d+ 0 3\r\n/mg), 200, 'a 200-key get answered over TLS');

# binary protocol over TLS (a connection speaks the protocol of its first byte)
my $b = tls_connect($port) or diag("TLS connect: $MCTLS::error");
my $bin_get = pack('CCnCCnNNNN', 0x80, 0x00, 1, 0, 0, 0, 1, 0xabcd, 0, 0) . 'a';
mc_send($b, $bin_get);
my $r = mc_bytes($b, 24 + 4 + 3);
my ($magic, $op, $status, $opaque) = (unpack('CCnCCnNNNN', $r))[0, 1, 5, 7];
is($magic, 0x81, 'binary reply over TLS');
is($status, 0, '... binary get hits');
is($opaque, 0xabcd, '... with the opaque echoed');
is(substr($r, 28), 'abc', '... and the value');

# notls: listener serves plain TCP on the same data
my $p = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$plain_port", Timeout => 5);
ok($p, 'notls: listener accepts plain TCP');
mc_is($p, "get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n", 'notls: listener sees what TLS stored');

# stats
my $set = mc_stats($s, 'settings');
is($set->{ssl_enabled}, 'yes', 'stats settings ssl_enabled yes');
is($set->{ssl_chain_cert}, $c->{server_crt}, 'ssl_chain_cert names the file');
is($set->{ssl_key}, $c->{server_key}, 'ssl_key names the file');
is($set->{ssl_verify_mode}, 0, 'ssl_verify_mode 0');
is($set->{ssl_keyformat}, 1, 'ssl_keyformat 1 (PEM)');
is($set->{ssl_ciphers}, 'NULL', 'ssl_ciphers NULL');
is($set->{ssl_ca_cert}, 'NULL', 'ssl_ca_cert NULL');
is($set->{ssl_wbuf_size}, 16384, 'ssl_wbuf_size 16384');
is($set->{ssl_session_cache}, 'no', 'ssl_session_cache no');
is($set->{ssl_kernel_tls}, 'no', 'ssl_kernel_tls no');
is($set->{ssl_min_version}, 'tlsv1.2', 'ssl_min_version tlsv1.2');
my $st = mc_stats($s);
ok(exists $st->{ssl_handshake_errors}, 'stats has ssl_handshake_errors');
ok(exists $st->{time_since_server_cert_refresh}, 'stats has time_since_server_cert_refresh');
ok(!exists $st->{ssl_new_sessions}, 'no ssl_new_sessions without ssl_session_cache');

# refresh_certs: new connections get the new certificate, old ones keep theirs
sub ou_of { my $d = $_[0]->peer_certificate('subject') // ''; return $d =~ /OU=(\w+)/ ? $1 : '' }
is(ou_of($s), 'Original', 'the first certificate');
open my $fh, '<', $c->{server_pem} or die;
my $pem = do { local $/; <$fh> };
close $fh;
for my $f ($c->{server_crt}, $c->{server_key}) {
    open my $o, '>', $f or die "$f: $!";
    print $o $pem;
    close $o;
}
mc_is($s, "refresh_certs\r\n", "OK\r\n", 'refresh_certs OK');
my $s2 = tls_connect($port) or diag("TLS connect: $MCTLS::error");
is(ou_of($s2), 'Refreshed', 'a new connection gets the refreshed certificate');
mc_is($s2, "get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n", '... and is served');
mc_is($s, "get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n", 'the old connection goes on');
unlink $c->{server_key};
mc_send($s, "refresh_certs\r\n");
like(mc_line($s), qr/^Error loading the (certificate chain|key): /,
    'refresh_certs with a missing file: memcached\'s error line');
my $s3 = tls_connect($port);
ok($s3, 'the server still accepts TLS after a failed refresh');
mc_is($s3, "get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n", '... and serves');
close $_ for $s, $s2, $s3, $p, $b;
$srv->stop;

# without -Z, refresh_certs is memcached's "TLS not enabled"
my $plain = start_server();
my $q = $plain->connect;
mc_is($q, "refresh_certs\r\n", "Error TLS not enabled\r\n", 'refresh_certs without -Z');
is(mc_stats($q, 'settings')->{ssl_enabled}, 'no', 'ssl_enabled no without -Z');
ok(!exists mc_stats($q)->{ssl_handshake_errors}, 'no ssl_* general stats without -Z');
close $q;
$plain->stop;

done_testing();

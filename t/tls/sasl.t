#!/usr/bin/env perl
# TLS and SASL together (-Z -S): binary SASL authentication over a TLS
# connection; unauthenticated commands refused over TLS as over TCP.
use strict;
use warnings;
use Test::More;
use MCTest;
use MCTLS;
use MCBinary;
use MCSASL;

sasl_userdb('plain');

my $c = tls_certs();
my $srv = start_server('-S', tls_server_args($c));
my $s = tls_connect($srv->port) or BAIL_OUT("TLS connect: $MCTLS::error");
my ($st, $body) = bin_op($s, 0x20);
is($st, 0, 'SASL LIST MECHS over TLS');
is($body, 'PLAIN', '... lists PLAIN');
($st) = bin_op($s, 0x21, 'PLAIN', "\0alice\0wrong");
is($st, 0x20, 'wrong password over TLS: AUTH_ERROR');
($st, $body) = bin_op($s, 0x21, 'PLAIN', "\0alice\0secret");
is($st, 0, 'right password over TLS: authenticated');
($st) = bin_op($s, 0x01, 'k', 'tls+sasl', pack('NN', 0, 0));
is($st, 0, 'an authenticated TLS connection stores');
($st, $body) = bin_op($s, 0x00, 'k');
is(substr($body, 4), 'tls+sasl', '... and reads');
my $u = tls_connect($srv->port) or BAIL_OUT("TLS connect: $MCTLS::error");
($st) = bin_op($u, 0x00, 'k');
is($st, 0x20, 'an unauthenticated TLS connection: AUTH_ERROR');
ok(mc_eof($u), '... and it is closed');
close $s;
$srv->stop;
done_testing();

#!/usr/bin/env perl
# TLS and SASL together (-Z -S): binary SASL authentication over a TLS
# connection; unauthenticated commands refused over TLS as over TCP.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use MCTest;
use MCTLS;

my $saslpasswd = (grep { -x } map {"$_/saslpasswd2"} split(/:/, $ENV{PATH}), '/usr/sbin')[0];
plan skip_all => 'saslpasswd2 (Debian sasl2-bin) is not installed' unless $saslpasswd;
my $dir = tempdir('mcsasl-XXXXXX', TMPDIR => 1, CLEANUP => 1);
open my $conf, '>', "$dir/memcached.conf" or die;
print $conf "mech_list: plain\nsasldb_path: $dir/sasldb\n";
close $conf;
system("echo secret | $saslpasswd -f $dir/sasldb -a memcached -c -p alice") == 0
  or BAIL_OUT('saslpasswd2 failed');
$ENV{SASL_CONF_PATH} = $dir;

sub call {
    my ($s, $op, $key, $value, $extras) = @_;
    ($key, $value, $extras) = map { $_ // '' } ($key, $value, $extras);
    mc_send($s, pack('CCnCCnNNNN', 0x80, $op, length $key, length $extras, 0, 0,
        length($extras) + length($key) + length($value), 7, 0, 0) . $extras . $key . $value)
      or return ('', '');
    my $h = mc_bytes($s, 24);
    return ('', '') if length $h < 24;
    my ($status, $len) = (unpack('CCnCCnNNNN', $h))[5, 6];
    return ($status, mc_bytes($s, $len));
}

my $c = tls_certs();
my $srv = start_server('-S', tls_server_args($c));
my $s = tls_connect($srv->port) or BAIL_OUT("TLS connect: $MCTLS::error");
my ($st, $body) = call($s, 0x20);
is($st, 0, 'SASL LIST MECHS over TLS');
is($body, 'PLAIN', '... lists PLAIN');
($st) = call($s, 0x21, 'PLAIN', "\0alice\0wrong");
is($st, 0x20, 'wrong password over TLS: AUTH_ERROR');
($st, $body) = call($s, 0x21, 'PLAIN', "\0alice\0secret");
is($st, 0, 'right password over TLS: authenticated');
($st) = call($s, 0x01, 'k', 'tls+sasl', pack('NN', 0, 0));
is($st, 0, 'an authenticated TLS connection stores');
($st, $body) = call($s, 0x00, 'k');
is(substr($body, 4), 'tls+sasl', '... and reads');
my $u = tls_connect($srv->port) or BAIL_OUT("TLS connect: $MCTLS::error");
($st) = call($u, 0x00, 'k');
is($st, 0x20, 'an unauthenticated TLS connection: AUTH_ERROR');
ok(mc_eof($u), '... and it is closed');
close $s;
$srv->stop;
done_testing();

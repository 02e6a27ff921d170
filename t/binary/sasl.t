#!/usr/bin/env perl
# Binary SASL (-S): LIST MECHS, AUTH and STEP (PLAIN and the two-step
# CRAM-MD5), commands refused before authenticating, wrong credentials,
# malformed SASL requests, auth_cmds / auth_errors. The user database is
# made at test time with saslpasswd2; SASL_CONF_PATH points the server at
# it, as for memcached -S.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Digest::MD5 qw(md5);
use MCTest;

my $saslpasswd = (grep { -x } map {"$_/saslpasswd2"} split(/:/, $ENV{PATH}), '/usr/sbin')[0];
plan skip_all => 'saslpasswd2 (Debian sasl2-bin) is not installed' unless $saslpasswd;

my $dir = tempdir('mcsasl-XXXXXX', TMPDIR => 1, CLEANUP => 1);
open my $conf, '>', "$dir/memcached.conf" or die;
print $conf "mech_list: plain cram-md5\nsasldb_path: $dir/sasldb\n";
close $conf;
system("echo secret | $saslpasswd -f $dir/sasldb -a memcached -c -p alice") == 0
  or BAIL_OUT('saslpasswd2 failed');
$ENV{SASL_CONF_PATH} = $dir;

use constant { GET => 0x00, SET => 0x01, DELETE => 0x04, FLUSH => 0x08, NOOP => 0x0a,
    VERSION => 0x0b, STAT => 0x10, LIST => 0x20, AUTH => 0x21, STEP => 0x22 };
use constant { OK => 0, NOT_FOUND => 1, EINVAL => 4, AUTH_ERROR => 0x20, AUTH_CONTINUE => 0x21,
    UNKNOWN => 0x81 };

sub request {
    my ($op, $key, $value, $extras) = @_;
    ($key, $value, $extras) = map { $_ // '' } ($key, $value, $extras);
    return pack('CCnCCnNNNN', 0x80, $op, length $key, length $extras, 0, 0,
        length($extras) + length($key) + length($value), 0x1234, 0, 0) . $extras . $key . $value;
}

# Sends one request; returns (status, body) of its reply ('' status on EOF).
sub call {
    my ($s, @req) = @_;
    mc_send($s, request(@req)) or return ('', '');
    my $h = mc_bytes($s, 24);
    return ('', '') if length $h < 24;
    my ($status, $len) = (unpack('CCnCCnNNNN', $h))[5, 6];
    return ($status, mc_bytes($s, $len));
}

sub plain { "\0$_[0]\0$_[1]" }

sub hmac_md5 {
    my ($key, $msg) = @_;
    $key = md5($key) if length $key > 64;
    $key .= "\0" x (64 - length $key);
    return md5(($key ^ ("\x5c" x 64)) . md5(($key ^ ("\x36" x 64)) . $msg));
}

my $srv = start_server('-S', '-B', 'binary');
my $s = $srv->connect;

my ($st, $body) = call($s, VERSION);
is($st, OK, 'VERSION is allowed before authenticating');
($st, $body) = call($s, LIST);
is($st, OK, 'SASL LIST MECHS answers');
is(join(' ', sort split ' ', $body), 'CRAM-MD5 PLAIN', '... the configured mechanisms');

($st) = call($s, SET, 'k', 'v', pack('NN', 0, 0));
is($st, AUTH_ERROR, 'a set before authenticating: AUTH_ERROR');
ok(mc_eof($s), '... and the connection closes, as memcached');
for my $op (GET, DELETE, FLUSH, NOOP, STAT) {
    my $t = $srv->connect;
    my ($st) = call($t, $op, $op == GET || $op == DELETE ? 'k' : '');
    is($st, AUTH_ERROR, sprintf('opcode 0x%02x before authenticating: AUTH_ERROR', $op));
}

$s = $srv->connect;
($st, $body) = call($s, AUTH, 'PLAIN', plain('alice', 'wrong'));
is($st, AUTH_ERROR, 'wrong password: AUTH_ERROR');
($st) = call($s, GET, 'k');
is($st, AUTH_ERROR, '... and the connection stays unauthenticated');

$s = $srv->connect;
($st) = call($s, AUTH, 'PLAIN', plain('mallory', 'secret'));
is($st, AUTH_ERROR, 'unknown user: AUTH_ERROR');
($st) = call($s, AUTH, 'X' x 33, plain('alice', 'secret'));
is($st, EINVAL, 'a mechanism name over 32 bytes: EINVAL');
($st) = call($s, AUTH, 'NOSUCH', plain('alice', 'secret'));
is($st, AUTH_ERROR, 'an unknown mechanism: AUTH_ERROR');
($st) = call($s, STEP, 'PLAIN', plain('alice', 'secret'));
is($st, AUTH_ERROR, 'STEP before AUTH: AUTH_ERROR');
($st, $body) = call($s, AUTH, 'PLAIN', plain('alice', 'secret'));
is($st, OK, 'right password: authenticated');
is($body, 'Authenticated', '... with memcached\'s text');
($st) = call($s, SET, 'k', 'v1', pack('NN', 0, 0));
is($st, OK, 'an authenticated connection stores');
($st, $body) = call($s, GET, 'k');
is($st, OK, '... and reads');
is(substr($body, 4), 'v1', '... its value');

# another connection is not authenticated by the first
my $other = $srv->connect;
($st) = call($other, GET, 'k');
is($st, AUTH_ERROR, 'authentication belongs to one connection');

# CRAM-MD5: AUTH answers AUTH_CONTINUE with a challenge, STEP finishes
my $cram = $srv->connect;
($st, my $challenge) = call($cram, AUTH, 'CRAM-MD5', '');
is($st, AUTH_CONTINUE, 'CRAM-MD5 AUTH: AUTH_CONTINUE');
like($challenge, qr/^<.+>$/, '... with a challenge');
($st, $body) = call($cram, STEP, 'CRAM-MD5',
    'alice ' . unpack('H*', hmac_md5('secret', $challenge)));
is($st, OK, 'CRAM-MD5 STEP with the right digest: authenticated');
($st, $body) = call($cram, GET, 'k');
is(substr($body, 4), 'v1', '... and reads');
my $cram2 = $srv->connect;
($st, $challenge) = call($cram2, AUTH, 'CRAM-MD5', '');
($st) = call($cram2, STEP, 'CRAM-MD5', 'alice ' . ('0' x 32));
is($st, AUTH_ERROR, 'CRAM-MD5 STEP with a wrong digest: AUTH_ERROR');

# SASL data larger than memcached would take, and a key longer than the body
my $big = $srv->connect;
($st) = call($big, AUTH, 'PLAIN', 'x' x 2_000_000);
ok($st == AUTH_ERROR || $st == 0x82 || $st == '', 'oversized SASL data is refused')
  or diag("status $st");
my $bad = $srv->connect;
mc_send($bad, pack('CCnCCnNNNN', 0x80, AUTH, 5, 0, 0, 0, 3, 0, 0, 0) . 'PLAIN');
ok(mc_eof($bad), 'a key longer than the body: the connection closes');

my $stats = $srv->connect;
call($stats, AUTH, 'PLAIN', plain('alice', 'secret'));
mc_send($stats, request(STAT));
my %got;
while (1) {
    my $h = mc_bytes($stats, 24);
    last if length $h < 24;
    my ($klen, $len) = (unpack('CCnCCnNNNN', $h))[2, 6];
    my $kv = mc_bytes($stats, $len);
    last if $klen == 0;
    $got{ substr($kv, 0, $klen) } = substr($kv, $klen);
}
# ok: alice, cram, stats; errors: wrong, mallory, NOSUCH, STEP, cram2, (big)
cmp_ok($got{auth_cmds}, '>=', 8, 'auth_cmds counts SASL exchanges');
cmp_ok($got{auth_errors}, '>=', 5, 'auth_errors counts the failed ones');
is($got{auth_cmds} - $got{auth_errors}, 3, 'three exchanges succeeded');

close $_ for $s, $other, $cram, $cram2, $big, $bad, $stats;
$srv->stop;

# memcached's start-up rules for -S
for my $case ([64, '-S', '-B', 'auto'], [64, '-S', '-B', 'ascii'], [64, '-S', '-U', '11211']) {
    my ($expect, @args) = @$case;
    my ($exited, $status) = run_briefly(5, @args);
    ok($exited && ($status >> 8) == $expect, "@args: exit status $expect, as memcached");
}
done_testing();

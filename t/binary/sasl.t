#!/usr/bin/env perl
# Binary SASL (-S): LIST MECHS, AUTH and STEP (PLAIN and the two-step
# CRAM-MD5), commands refused before authenticating, wrong credentials,
# malformed SASL requests, auth_cmds / auth_errors. The user database is
# made at test time with saslpasswd2; SASL_CONF_PATH points the server at
# it, as for memcached -S.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5);
use MCTest;
use MCBinary;
use MCSASL;

sasl_userdb('plain', 'cram-md5');

use constant { GET => 0x00, SET => 0x01, DELETE => 0x04, FLUSH => 0x08, NOOP => 0x0a,
    VERSION => 0x0b, STAT => 0x10, LIST => 0x20, AUTH => 0x21, STEP => 0x22 };
use constant { OK => 0, NOT_FOUND => 1, EINVAL => 4, AUTH_ERROR => 0x20, AUTH_CONTINUE => 0x21,
    UNKNOWN => 0x81 };

sub plain { "\0$_[0]\0$_[1]" }

sub hmac_md5 {
    my ($key, $msg) = @_;
    $key = md5($key) if length $key > 64;
    $key .= "\0" x (64 - length $key);
    return md5(($key ^ ("\x5c" x 64)) . md5(($key ^ ("\x36" x 64)) . $msg));
}

my $srv = start_server('-S', '-B', 'binary');
my $s = $srv->connect;

my ($st, $body) = bin_op($s, VERSION);
is($st, OK, 'VERSION is allowed before authenticating');
($st, $body) = bin_op($s, LIST);
is($st, OK, 'SASL LIST MECHS answers');
is(join(' ', sort split ' ', $body), 'CRAM-MD5 PLAIN', '... the configured mechanisms');

($st) = bin_op($s, SET, 'k', 'v', pack('NN', 0, 0));
is($st, AUTH_ERROR, 'a set before authenticating: AUTH_ERROR');
ok(mc_eof($s), '... and the connection closes, as memcached');
for my $op (GET, DELETE, FLUSH, NOOP, STAT) {
    my $t = $srv->connect;
    my ($st) = bin_op($t, $op, $op == GET || $op == DELETE ? 'k' : '');
    is($st, AUTH_ERROR, sprintf('opcode 0x%02x before authenticating: AUTH_ERROR', $op));
}

$s = $srv->connect;
($st, $body) = bin_op($s, AUTH, 'PLAIN', plain('alice', 'wrong'));
is($st, AUTH_ERROR, 'wrong password: AUTH_ERROR');
($st) = bin_op($s, GET, 'k');
is($st, AUTH_ERROR, '... and the connection stays unauthenticated');

$s = $srv->connect;
($st) = bin_op($s, AUTH, 'PLAIN', plain('mallory', 'secret'));
is($st, AUTH_ERROR, 'unknown user: AUTH_ERROR');
($st) = bin_op($s, AUTH, 'X' x 33, plain('alice', 'secret'));
is($st, EINVAL, 'a mechanism name over 32 bytes: EINVAL');
($st) = bin_op($s, AUTH, 'NOSUCH', plain('alice', 'secret'));
is($st, AUTH_ERROR, 'an unknown mechanism: AUTH_ERROR');
($st) = bin_op($s, STEP, 'PLAIN', plain('alice', 'secret'));
is($st, AUTH_ERROR, 'STEP before AUTH: AUTH_ERROR');
($st, $body) = bin_op($s, AUTH, 'PLAIN', plain('alice', 'secret'));
is($st, OK, 'right password: authenticated');
is($body, 'Authenticated', '... with memcached\'s text');
($st) = bin_op($s, SET, 'k', 'v1', pack('NN', 0, 0));
is($st, OK, 'an authenticated connection stores');
($st, $body) = bin_op($s, GET, 'k');
is($st, OK, '... and reads');
is(substr($body, 4), 'v1', '... its value');

# another connection is not authenticated by the first
my $other = $srv->connect;
($st) = bin_op($other, GET, 'k');
is($st, AUTH_ERROR, 'authentication belongs to one connection');

# CRAM-MD5: AUTH answers AUTH_CONTINUE with a challenge, STEP finishes
my $cram = $srv->connect;
($st, my $challenge) = bin_op($cram, AUTH, 'CRAM-MD5', '');
is($st, AUTH_CONTINUE, 'CRAM-MD5 AUTH: AUTH_CONTINUE');
like($challenge, qr/^<.+>$/, '... with a challenge');
($st, $body) = bin_op($cram, STEP, 'CRAM-MD5',
    'alice ' . unpack('H*', hmac_md5('secret', $challenge)));
is($st, OK, 'CRAM-MD5 STEP with the right digest: authenticated');
($st, $body) = bin_op($cram, GET, 'k');
is(substr($body, 4), 'v1', '... and reads');
my $cram2 = $srv->connect;
($st, $challenge) = bin_op($cram2, AUTH, 'CRAM-MD5', '');
($st) = bin_op($cram2, STEP, 'CRAM-MD5', 'alice ' . ('0' x 32));
is($st, AUTH_ERROR, 'CRAM-MD5 STEP with a wrong digest: AUTH_ERROR');

# SASL data larger than memcached would take, and a key longer than the body
my $big = $srv->connect;
($st) = bin_op($big, AUTH, 'PLAIN', 'x' x 2_000_000);
ok($st == AUTH_ERROR || $st == 0x82 || $st == '', 'oversized SASL data is refused')
  or diag("status $st");
my $bad = $srv->connect;
mc_send($bad, bin_req(AUTH, key => 'PLAIN', keylen => 5, bodylen => 3));
ok(mc_eof($bad), 'a key longer than the body: the connection closes');

my $stats = $srv->connect;
bin_op($stats, AUTH, 'PLAIN', plain('alice', 'secret'));
my %got = %{ bin_stats($stats) // {} };
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

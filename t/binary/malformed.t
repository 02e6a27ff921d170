#!/usr/bin/perl
# t/binary/malformed.t: bad binary frames get memcached's answers: a wrong
# magic closes the connection; a body length shorter than key + extras
# answers UNKNOWN_COMMAND and closes; a key over 250 bytes or lengths a
# command does not accept answer EINVAL and close; an unknown opcode answers
# UNKNOWN_COMMAND and its body is skipped; a value over -I answers E2BIG and
# is skipped, as is one that does not fit in memory under -M (ENOMEM).
# Items not named by a bad request are never touched. Against
# $MC_SERVER (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use MCTest;
use MCBinary;

my $srv = start_server();

# Sentinels: must survive everything below.
my %sentinel = map { ("sentinel$_" => "value$_" x $_) } 1 .. 5;
{
    my $s = $srv->connect;
    for my $k (sort keys %sentinel) {
        my $r = bin_call($s, bin_req($OP{set}, key => $k, extras => ext_store(9, 0),
            value => $sentinel{$k}));
        die "cannot store $k" unless $r && $r->{status} == 0;
    }
    close $s;
}

sub reply_is {
    my ($r, $want, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return fail("$name: no reply") unless $r;
    my %got = map { $_ => $r->{$_} } keys %$want;
    return is_deeply(\%got, $want, $name);
}

# Sends $frame on a connection whose first request was a valid NOOP (so the
# binary engine is chosen), expects $want as the reply, then a close.
sub error_then_close {
    my ($frame, $want, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $s = $srv->connect;
    mc_send($s, bin_req($OP{noop}, opaque => 1));
    bin_read($s);
    mc_send($s, $frame . bin_req($OP{noop}, opaque => 2));
    reply_is(bin_read($s), $want, "$name: reply");
    is(mc_bytes($s, 24, 3), '', "$name: then the connection closes");
    close $s;
}

# ---- wrong magic --------------------------------------------------------------
{
    my $s = $srv->connect;
    mc_send($s, bin_req($OP{noop}, opaque => 1));
    reply_is(bin_read($s), { opcode => $OP{noop}, status => 0 }, 'a valid first request');
    mc_send($s, bin_req($OP{noop}, opaque => 2, magic => 0x81));
    is(mc_bytes($s, 1, 3), '', 'magic 0x81 (a response) as a request: closed without a reply');
    close $s;
    $s = $srv->connect;
    mc_send($s, bin_req($OP{noop}, opaque => 1) . bin_req($OP{get}, key => 'x', magic => 0x00));
    reply_is(bin_read($s), { opcode => $OP{noop}, status => 0, opaque => 1 },
        'a NOOP before a frame with magic 0x00 is answered');
    is(mc_bytes($s, 1, 3), '', 'magic 0x00: closed without a reply');
    close $s;
}

# ---- lengths that disagree -------------------------------------------------------
error_then_close(bin_req($OP{get}, key => 'sentinel1', bodylen => 3, opaque => 7),
    { opcode => $OP{get}, status => $ST{unknown_command}, opaque => 7,
      value => 'Unknown command' }, 'bodylen shorter than the key');
error_then_close(bin_req($OP{set}, key => 'sentinel2', extras => ext_store(0, 0),
        value => 'zz', bodylen => 9, opaque => 8) ,
    { opcode => $OP{set}, status => $ST{unknown_command}, opaque => 8 },
    'bodylen shorter than key + extras');

my %einval = (status => $ST{einval}, value => 'Invalid arguments');
error_then_close(bin_req($OP{get}, key => 'k' x 251, opaque => 9),
    { opcode => $OP{get}, opaque => 9, %einval }, 'get with a 251-byte key');
error_then_close(bin_req($OP{set}, key => 'k' x 300, extras => ext_store(0, 0), value => 'v',
        opaque => 10),
    { opcode => $OP{set}, opaque => 10, %einval }, 'set with a 300-byte key');
error_then_close(bin_req($OP{get}, key => 'sentinel1', extras => 'abcd', opaque => 11),
    { opcode => $OP{get}, opaque => 11, %einval }, 'get with extras');
error_then_close(bin_req($OP{get}, key => 'sentinel1', value => 'xx', opaque => 12),
    { opcode => $OP{get}, opaque => 12, %einval }, 'get with a value');
error_then_close(bin_req($OP{get}, opaque => 13),
    { opcode => $OP{get}, opaque => 13, %einval }, 'get without a key');
error_then_close(bin_req($OP{set}, key => 'sentinel3', value => 'x', opaque => 14),
    { opcode => $OP{set}, opaque => 14, %einval }, 'set without extras');
error_then_close(bin_req($OP{delete}, key => 'sentinel3', value => 'x', opaque => 15),
    { opcode => $OP{delete}, opaque => 15, %einval }, 'delete with a value');
error_then_close(bin_req($OP{incr}, key => 'sentinel4', extras => ext_store(1, 0), opaque => 16),
    { opcode => $OP{incr}, opaque => 16, %einval }, 'incr with 8 bytes of extras');
error_then_close(bin_req($OP{append}, key => 'sentinel4', extras => ext_exp(0), value => 'x',
        opaque => 17),
    { opcode => $OP{append}, opaque => 17, %einval }, 'append with extras');
error_then_close(bin_req($OP{touch}, key => 'sentinel5', opaque => 18),
    { opcode => $OP{touch}, opaque => 18, %einval }, 'touch without extras');
error_then_close(bin_req($OP{noop}, value => 'x', opaque => 19),
    { opcode => $OP{noop}, opaque => 19, %einval }, 'noop with a body');
error_then_close(bin_req($OP{version}, key => 'v', opaque => 20),
    { opcode => $OP{version}, opaque => 20, %einval }, 'version with a key');
error_then_close(bin_req($OP{flush}, extras => 'ab', opaque => 21),
    { opcode => $OP{flush}, opaque => 21, %einval }, 'flush with 2 bytes of extras');
error_then_close(bin_req($OP{stat}, extras => ext_exp(0), opaque => 22),
    { opcode => $OP{stat}, opaque => 22, %einval }, 'stat with extras');
error_then_close(bin_req($OP{getq}, key => 'k' x 251, opaque => 23),
    { opcode => $OP{getq}, opaque => 23, %einval }, 'a quiet get with a 251-byte key answers');

# ---- a 250-byte key is fine -------------------------------------------------------
{
    my $s = $srv->connect;
    my $k = 'L' x 250;
    my $r = bin_call($s, bin_req($OP{set}, key => $k, extras => ext_store(0, 0), value => 'long',
        opaque => 1));
    is($r && $r->{status}, 0, 'a 250-byte key: set works');
    $r = bin_call($s, bin_req($OP{getk}, key => $k, opaque => 2));
    ok($r && $r->{key} eq $k && $r->{value} eq 'long', 'a 250-byte key: getk returns it');
    close $s;
}

# ---- unknown opcodes ------------------------------------------------------------------
{
    my $s = $srv->connect;
    for my $op (0x1f, 0x30, 0x50, 0xfe) {
        mc_send($s, bin_req($op, value => 'body-to-skip' x 3, opaque => 100 + $op)
              . bin_req($OP{noop}, opaque => 200 + $op));
        reply_is(bin_read($s), { opcode => $op, status => $ST{unknown_command},
            opaque => 100 + $op, value => 'Unknown command' },
            sprintf('opcode 0x%02x: UNKNOWN_COMMAND', $op));
        reply_is(bin_read($s), { opcode => $OP{noop}, status => 0, opaque => 200 + $op },
            sprintf('opcode 0x%02x: its body is skipped, the next request answered', $op));
    }
    close $s;
}

# ---- values over the item size limit ------------------------------------------------
{
    my $s = $srv->connect;
    my $big = 'B' x (1024 * 1024 + 1);
    for my $k (qw(victim_set victim_add victim_append)) {
        bin_call($s, bin_req($OP{set}, key => $k, extras => ext_store(0, 0), value => 'old'));
    }
    mc_send($s, bin_req($OP{set}, key => 'victim_set', extras => ext_store(0, 0), value => $big,
            opaque => 31)
          . bin_req($OP{noop}, opaque => 32));
    reply_is(bin_read($s), { opcode => $OP{set}, status => $ST{e2big}, opaque => 31,
        value => 'Too large.' }, 'set over 1 MiB: E2BIG');
    reply_is(bin_read($s), { opcode => $OP{noop}, opaque => 32 },
        'set over 1 MiB: the value is skipped, the next request answered');
    my $r = bin_call($s, bin_req($OP{get}, key => 'victim_set'));
    is($r && $r->{status}, $ST{key_enoent}, 'a failed set removes the old value');

    mc_send($s, bin_req($OP{setq}, key => 'victim_q', extras => ext_store(0, 0), value => $big,
            opaque => 33)
          . bin_req($OP{noop}, opaque => 34));
    reply_is(bin_read($s), { opcode => $OP{setq}, status => $ST{e2big}, opaque => 33 },
        'setq over 1 MiB: E2BIG is answered');
    reply_is(bin_read($s), { opcode => $OP{noop}, opaque => 34 }, 'setq over 1 MiB: skipped');

    mc_send($s, bin_req($OP{add}, key => 'victim_add', extras => ext_store(0, 0), value => $big,
            opaque => 35)
          . bin_req($OP{append}, key => 'victim_append', value => $big, opaque => 36)
          . bin_req($OP{noop}, opaque => 37));
    reply_is(bin_read($s), { opcode => $OP{add}, status => $ST{e2big}, opaque => 35 },
        'add over 1 MiB: E2BIG');
    reply_is(bin_read($s), { opcode => $OP{append}, status => $ST{e2big}, opaque => 36 },
        'append over 1 MiB: E2BIG');
    reply_is(bin_read($s), { opcode => $OP{noop}, opaque => 37 }, 'both values skipped');
    $r = bin_call($s, bin_req($OP{get}, key => 'victim_add'));
    is($r && $r->{value}, 'old', 'a failed add leaves the old value');
    $r = bin_call($s, bin_req($OP{get}, key => 'victim_append'));
    is($r && $r->{value}, 'old', 'a failed append leaves the old value');
    close $s;
}

# ---- nothing else was touched ------------------------------------------------------
{
    my $s = $srv->connect;
    my $intact = 1;
    for my $k (sort keys %sentinel) {
        my $r = bin_call($s, bin_req($OP{get}, key => $k));
        $intact = 0 unless $r && $r->{status} == 0 && $r->{value} eq $sentinel{$k}
          && flags_of($r) == 9;
    }
    ok($intact, 'every sentinel item is unchanged');
    my $st = bin_stats($s);
    is($st && $st->{curr_items}, scalar(keys %sentinel) + 3,
        'no item was created by a bad request');
    close $s;
}

$srv->stop;

# ---- out of memory with -M: ENOMEM, the value skipped ------------------------------
{
    my $small = start_server('-M', '-m', '2');
    my $s = $small->connect;
    my $v = 'm' x 100_000;
    bin_call($s, bin_req($OP{set}, key => 'oldval', extras => ext_store(0, 0), value => 'old'));
    my $r;
    for my $i (1 .. 200) {    # 2 MB of memory fills well before 200 x 100 kB
        $r = bin_call($s, bin_req($OP{set}, key => "fill$i", extras => ext_store(0, 0),
            value => $v, opaque => $i));
        last if !$r || $r->{status} != 0;
    }
    reply_is($r, { opcode => $OP{set}, status => $ST{enomem},
        value => 'Out of memory allocating item' }, '-M, memory full: set answers ENOMEM');
    mc_send($s, bin_req($OP{setq}, key => 'oldval', extras => ext_store(0, 0), value => $v,
            opaque => 501)
          . bin_req($OP{noop}, opaque => 502));
    reply_is(bin_read($s), { opcode => $OP{setq}, status => $ST{enomem}, opaque => 501 },
        '-M, memory full: setq answers ENOMEM');
    reply_is(bin_read($s), { opcode => $OP{noop}, status => 0, opaque => 502 },
        '-M, memory full: the value is skipped, the next request answered');
    $r = bin_call($s, bin_req($OP{get}, key => 'oldval'));
    is($r && $r->{status}, $ST{key_enoent}, '-M, memory full: a failed set removes the old value');
    close $s;
    $small->stop;
}
done_testing();

#!/usr/bin/perl
# t/binary/quiet.t: quiet-command batches over the binary protocol: a quiet
# command answers only on error (quiet gets only on a hit), replies come in
# request order with their opaques, and a NOOP ends the batch. Against
# $MC_SERVER (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use MCTest;
use MCBinary;

my $srv = start_server();
my $s   = $srv->connect;

# Reads replies up to and including the one with opaque $last; returns
# "opcode/status/opaque" strings.
sub replies_until {
    my ($last) = @_;
    my @seen;
    for (1 .. 1000) {
        my $r = bin_read($s) or return (@seen, 'timeout');
        push @seen, sprintf('%02x/%02x/%d', $r->{opcode}, $r->{status}, $r->{opaque});
        return @seen if $r->{opaque} == $last;
    }
    return @seen;
}

# ---- successes only: nothing until the NOOP -----------------------------------
my $batch = '';
$batch .= bin_req($OP{setq}, key => "q$_", extras => ext_store($_, 0), value => "v$_",
    opaque => $_) for 1 .. 50;
mc_send($s, $batch);
ok(mc_silent($s, 0.3), 'fifty setq: no reply at all');
mc_send($s, bin_req($OP{noop}, opaque => 1000));
is_deeply([replies_until(1000)], ['0a/00/1000'], 'the NOOP is the only reply');

# ---- a mixed batch: errors and hits answered in order --------------------------------
my @req = (
    [ $OP{getq},    { key => 'q1' },                                           1, '09/00/1' ],
    [ $OP{getq},    { key => 'nope' },                                          2, undef ],
    [ $OP{getkq},   { key => 'q2' },                                           3, '0d/00/3' ],
    [ $OP{getkq},   { key => 'nope' },                                          4, undef ],
    [ $OP{addq},    { key => 'q3', extras => ext_store(0, 0), value => 'x' },  5, '12/02/5' ],
    [ $OP{addq},    { key => 'new1', extras => ext_store(0, 0), value => 'n' }, 6, undef ],
    [ $OP{replaceq}, { key => 'nope', extras => ext_store(0, 0), value => 'x' }, 7, '13/01/7' ],
    [ $OP{replaceq}, { key => 'q4', extras => ext_store(0, 0), value => 'R' }, 8, undef ],
    [ $OP{deleteq}, { key => 'nope' },                                          9, '14/01/9' ],
    [ $OP{deleteq}, { key => 'q5' },                                           10, undef ],
    [ $OP{incrq},   { key => 'q6', extras => ext_arith(1, 0, 0) },             11, '15/06/11' ],
    [ $OP{incrq},   { key => 'cnt', extras => ext_arith(1, 7, 0) },            12, undef ],
    [ $OP{decrq},   { key => 'nope', extras => ext_arith(1, 0, 0xffffffff) },  13, '16/01/13' ],
    [ $OP{appendq}, { key => 'nope', value => 'x' },                           14, '19/05/14' ],
    [ $OP{appendq}, { key => 'q7', value => '+' },                             15, undef ],
    [ $OP{prependq}, { key => 'nope', value => 'x' },                          16, '1a/05/16' ],
    [ $OP{prependq}, { key => 'q7', value => '-' },                            17, undef ],
    [ $OP{gatq},    { key => 'q8', extras => ext_exp(0) },                     18, '1e/00/18' ],
    [ $OP{gatq},    { key => 'nope', extras => ext_exp(0) },                   19, undef ],
    [ $OP{gatkq},   { key => 'q9', extras => ext_exp(0) },                     20, '24/00/20' ],
    [ $OP{gatkq},   { key => 'nope', extras => ext_exp(0) },                   21, undef ],
    [ $OP{setq},    { key => 'q10', extras => ext_store(0, 0), value => 'x', cas => 1 }, 22,
      '11/01/22' ],
    [ $OP{get},     { key => 'nope' },                                         23, '00/01/23' ],
    [ $OP{noop},    {},                                                         24, '0a/00/24' ],
);
# q10 does not exist yet, so setq with a cas is KEY_ENOENT
mc_send($s, bin_req($OP{deleteq}, key => 'q10') . bin_req($OP{noop}, opaque => 999));
replies_until(999);
mc_send($s, join '', map { bin_req($_->[0], %{ $_->[1] }, opaque => $_->[2]) } @req);
is_deeply([replies_until(24)], [grep { defined } map { $_->[3] } @req],
    'a mixed quiet batch: only errors and quiet-get hits, in request order');

my $r = bin_call($s, bin_req($OP{get}, key => 'new1', opaque => 30));
is($r && $r->{value}, 'n', 'the silent addq stored its value');
$r = bin_call($s, bin_req($OP{get}, key => 'q4', opaque => 31));
is($r && $r->{value}, 'R', 'the silent replaceq stored its value');
$r = bin_call($s, bin_req($OP{get}, key => 'q5', opaque => 32));
is($r && $r->{status}, $ST{key_enoent}, 'the silent deleteq removed its key');
$r = bin_call($s, bin_req($OP{get}, key => 'cnt', opaque => 33));
is($r && $r->{value}, '7', 'the silent incrq created its counter');
$r = bin_call($s, bin_req($OP{get}, key => 'q7', opaque => 34));
is($r && $r->{value}, '-v7+', 'the silent appendq and prependq changed the value');

# ---- a multi-get the way libmemcached sends one -----------------------------------------
my @keys = map { "q$_" } 11 .. 40;
my @ask = map { ($_, "absent$_") } @keys;
my $i = 0;
mc_send($s, join('', map { bin_req($OP{getkq}, key => $_, opaque => ++$i) } @ask)
      . bin_req($OP{noop}, opaque => 5000));
my @got;
for (1 .. 100) {
    my $x = bin_read($s) or last;
    last if $x->{opcode} == $OP{noop};
    push @got, "$x->{key}=$x->{value}";
}
is_deeply(\@got, [ map { my ($n) = /(\d+)/; "$_=v$n" } @keys ],
    'getkq multi-get: every hit with its key, in order, misses silent');

close $s;
$srv->stop;

# ---- -R 2: a long pipeline is served in slices, nothing lost --------------------------
$srv = start_server('-R', '2');
$s = $srv->connect;
my $pipe = '';
$pipe .= bin_req($OP{set}, key => "r$_", extras => ext_store(0, 0), value => "rv$_", opaque => $_)
  for 1 .. 40;
$pipe .= bin_req($OP{getq}, key => "r$_", opaque => 100 + $_) for 1 .. 40;
$pipe .= bin_req($OP{noop}, opaque => 999);
mc_send($s, $pipe);
my @order;
for (1 .. 100) {
    my $x = bin_read($s) or last;
    push @order, $x->{opaque};
    last if $x->{opaque} == 999;
}
is_deeply(\@order, [ 1 .. 40, 101 .. 140, 999 ], '-R 2: 81 pipelined requests, all answered in order');
my $yst = bin_stats($s);
ok($yst && $yst->{conn_yields} > 0, '-R 2: the connection yielded (conn_yields)');
close $s;
$srv->stop;
done_testing();

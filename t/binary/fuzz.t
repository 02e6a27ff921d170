#!/usr/bin/perl
# t/binary/fuzz.t: a short, seeded fuzz run of the binary request parser:
# valid frames of every opcode with random header bytes, lengths and bodies
# changed, cut short or glued together, over many connections. The server
# must stay up, keep answering, and leave items outside the fuzzed keys
# untouched. Against $MC_SERVER (our server or Debian's memcached); the
# sanitizer build runs it too. MC_FUZZ_SEED picks another sequence.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use IO::Select;
use Time::HiRes qw(time);
use MCTest;
use MCBinary;

my $seed = $ENV{MC_FUZZ_SEED} // 20240611;
srand($seed);
note("seed $seed");

my $srv = start_server('-m', '16');
my %sentinel = map { ("SENTINEL-$_" => "kept-$_" x 3) } 1 .. 4;
{
    my $s = $srv->connect;
    for my $k (sort keys %sentinel) {
        bin_call($s, bin_req($OP{set}, key => $k, extras => ext_store(1, 0),
            value => $sentinel{$k}));
    }
    close $s;
}

# every opcode but the flushes (they would empty the cache on purpose)
my @ops = sort { $a <=> $b } grep { $_ != $OP{flush} && $_ != $OP{flushq} } values %OP;
push @ops, 0x1f, 0x25, 0x30, 0x7f, 0xff;

# A plausible frame for a random opcode, lower-case keys only.
sub plausible {
    my $op  = $ops[ int rand @ops ];
    my $key = join '', map { chr(97 + int rand 6) } 1 .. 1 + int rand 8;
    my $ext = ('', ext_store(int rand 9, 0), ext_arith(int rand 5, 3, 0), ext_exp(0))[ int rand 4 ];
    my $val = 'v' x int rand 40;
    return bin_req($op, key => $key, extras => $ext, value => $val, opaque => int rand 1000);
}

# A random change: a header byte, a length field, the tail, or noise.
sub mutate {
    my $f = shift;
    my $kind = int rand 6;
    if ($kind == 0) {
        substr($f, 1 + int rand 23, 1) = chr int rand 256;
    } elsif ($kind == 1) {
        substr($f, 2, 2) = pack('n', int rand 300);
    } elsif ($kind == 2) {
        substr($f, 8, 4) = pack('N', int rand 100);
    } elsif ($kind == 3) {
        $f = substr($f, 0, int rand length $f);
    } elsif ($kind == 4) {
        $f .= join '', map { chr int rand 256 } 1 .. int rand 30;
    } else {
        substr($f, 4, 1) = chr int rand 32;
    }
    return $f;
}

my $deadline = time + 20;
my ($conns, $frames) = (0, 0);
for my $c (1 .. 150) {
    last if time > $deadline;
    my $s = $srv->connect;
    my $data = bin_req($OP{noop});    # the binary engine, also under -B auto
    for (1 .. 1 + int rand 12) {
        my $f = plausible();
        $f = mutate($f) if rand() < 0.6;
        $data .= $f;
        $frames++;
    }
    eval { mc_send($s, $data) };
    # read what comes for a moment, then hang up
    my $sel = IO::Select->new($s);
    my $until = time + 0.02;
    while (time < $until && $sel->can_read(0.01)) {
        last unless sysread($s, my $buf, 65536);
    }
    close $s;
    $conns++;
}
note("$frames frames over $conns connections");
ok($conns >= 100, "fuzzed $frames frames over $conns connections within the time bound");
ok($srv->alive, 'the server is still running');

my $s = $srv->connect;
my $r = bin_call($s, bin_req($OP{noop}, opaque => 4321));
ok($r && $r->{opcode} == $OP{noop} && $r->{opaque} == 4321, 'a new connection is served');
my $intact = 1;
for my $k (sort keys %sentinel) {
    $r = bin_call($s, bin_req($OP{get}, key => $k));
    $intact = 0 unless $r && $r->{status} == 0 && $r->{value} eq $sentinel{$k};
}
ok($intact, 'items outside the fuzzed keys are untouched');
close $s;
$srv->stop;
done_testing();

#!/usr/bin/perl
# t/binary/split.t: binary requests split at any byte boundary, pipelines
# sent one byte at a time, large values in uneven pieces, and replies
# larger than the socket buffers read slowly, so the server must finish
# partial writes. Against $MC_SERVER (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(sleep);
use MCTest;
use MCBinary;

my $srv = start_server('-I', '2m');

sub conn {
    my $s = $srv->connect;
    setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
    return $s;
}

# ---- one request split at every boundary --------------------------------------
{
    my $s = conn();
    my $ok = 1;
    my $frame = bin_req($OP{set}, key => 'splitkey', extras => ext_store(5, 0),
        value => 'split-value', opaque => 0);
    for my $cut (1 .. length($frame) - 1) {
        my $f = bin_req($OP{set}, key => 'splitkey', extras => ext_store($cut, 0),
            value => 'split-value', opaque => $cut);
        mc_send($s, substr($f, 0, $cut));
        sleep 0.003;
        mc_send($s, substr($f, $cut));
        my $r = bin_read($s);
        $ok = 0 unless $r && $r->{status} == 0 && $r->{opaque} == $cut;
    }
    ok($ok, 'a set split at each of its ' . (length($frame) - 1) . ' inner boundaries');
    my $r = bin_call($s, bin_req($OP{get}, key => 'splitkey'));
    ok($r && $r->{value} eq 'split-value' && flags_of($r) == length($frame) - 1,
        'the last split set is stored');
    close $s;
}

# ---- a pipeline one byte at a time -------------------------------------------------
{
    my $s = conn();
    my $pipe = bin_req($OP{set}, key => 'p1', extras => ext_store(1, 0), value => 'abc',
            opaque => 1)
      . bin_req($OP{getk}, key => 'p1', opaque => 2)
      . bin_req($OP{incr}, key => 'p2', extras => ext_arith(2, 40, 0), opaque => 3)
      . bin_req($OP{incr}, key => 'p2', extras => ext_arith(2, 40, 0), opaque => 4)
      . bin_req($OP{getq}, key => 'none', opaque => 5)
      . bin_req($OP{append}, key => 'p1', value => 'def', opaque => 6)
      . bin_req($OP{get}, key => 'p1', opaque => 7)
      . bin_req($OP{delete}, key => 'p1', opaque => 8)
      . bin_req($OP{noop}, opaque => 9);
    for my $i (0 .. length($pipe) - 1) {
        mc_send($s, substr($pipe, $i, 1));
        sleep 0.0005 if $i % 4 == 0;
    }
    my @got;
    for (1 .. 8) {
        my $r = bin_read($s) or last;
        push @got, join(':', $r->{opaque}, $r->{status}, $r->{key},
            $r->{opcode} == $OP{incr} ? u64_of($r->{value}) : $r->{value});
    }
    is_deeply(\@got,
        [ '1:0::', '2:0:p1:abc', '3:0::40', '4:0::42', '6:0::', '7:0::abcdef', '8:0::', '9:0::' ],
        'a pipeline sent byte by byte: every reply, in order');
    close $s;
}

# ---- large values in uneven pieces ------------------------------------------------------
my $value = join '', map { sprintf('%07d|', $_) } 1 .. 150_000;    # 1.2 MB
{
    my $s = conn();
    my $frame = bin_req($OP{set}, key => 'bigval', extras => ext_store(3, 0), value => $value,
        opaque => 77);
    my ($off, $step) = (0, 1);
    while ($off < length $frame) {
        my $n = $step;
        $n = length($frame) - $off if $off + $n > length $frame;
        mc_send($s, substr($frame, $off, $n));
        $off += $n;
        $step = $step * 7 % 65_521 + 1;    # uneven sizes, 1 byte to 64 KiB
    }
    my $r = bin_read($s, 10);
    ok($r && $r->{status} == 0 && $r->{opaque} == 77, 'a 1.2 MB value sent in uneven pieces');
    $r = bin_call($s, bin_req($OP{get}, key => 'bigval'), 10);
    ok($r && $r->{value} eq $value, 'the 1.2 MB value reads back intact');
    close $s;
}

# ---- replies larger than the socket buffers, read slowly -----------------------------------
{
    my $s = conn();
    my $n = 8;    # 9.6 MB: more than loopback socket buffers hold
    mc_send($s, join('', map { bin_req($OP{getk}, key => 'bigval', opaque => $_) } 1 .. $n)
          . bin_req($OP{noop}, opaque => 99));
    sleep 0.3;    # let the server fill the socket and wait for room
    my $ok = 1;
    for my $i (1 .. $n) {
        my $head = mc_bytes($s, 24, 10);
        last unless length $head == 24;
        my ($bodylen, $opaque) = (unpack('C C n C C n N N Q>', $head))[6, 7];
        my $body = '';
        while (length $body < $bodylen) {    # small reads: many partial writes
            my $want = $bodylen - length $body;
            my $chunk = mc_bytes($s, $want < 32768 ? $want : 32768, 10);
            last unless length $chunk;
            $body .= $chunk;
        }
        $ok = 0 unless $opaque == $i && substr($body, 4 + 6) eq $value;
    }
    ok($ok, "$n pipelined 1.2 MB replies read slowly arrive whole and in order");
    my $r = bin_read($s);
    ok($r && $r->{opcode} == $OP{noop} && $r->{opaque} == 99, 'then the NOOP');
    close $s;
}

$srv->stop;
done_testing();

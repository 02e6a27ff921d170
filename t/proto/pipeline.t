#!/usr/bin/perl
# t/proto/pipeline.t: pipelined requests. One multi-command pipeline is sent
# split into two writes at every byte offset (and once a byte at a time);
# the full reply must always be the same. Also large pipelines whose replies
# outgrow the socket buffers, and replies after the client half-closes.
use strict;
use warnings;
use Test::More;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(sleep time);
use MCTest;

my $srv = start_server('-m', '64');

# Pipeline and its reply for keys $k (item) and $n (counter), both 5 bytes.
sub pipeline {
    my ($k, $n) = @_;
    my $val = join '', map { chr(ord('a') + $_ % 26) } 0 .. 99;
    my $req = "set $k 3 0 5\r\nhello\r\n"
      . "get $k\r\n"
      . "append $k 0 0 3\r\n!\r\n\r\n"
      . "get $k\r\n"
      . "set $n 0 0 2 noreply\r\n10\r\n"
      . "incr $n 5\r\n"
      . "decr $n 20\r\n"
      . "incr $n 7\r\n"
      . "touch $k 100\r\n"
      . "bogus command\r\n"
      . "delete $k\r\n"
      . "get $k\r\n"
      . "incr $n 0\r\n"
      . "add $k 0 0 100\r\n$val\r\n"
      . "gat 100 $k\r\n"
      . "delete $k noreply\r\n"
      . "delete $n\r\n"
      . "get $k $n\r\n";
    my $rep = "STORED\r\n"
      . "VALUE $k 3 5\r\nhello\r\nEND\r\n"
      . "STORED\r\n"
      . "VALUE $k 3 8\r\nhello!\r\n\r\nEND\r\n"
      . "15\r\n"
      . "0\r\n"
      . "7\r\n"
      . "TOUCHED\r\n"
      . "ERROR\r\n"
      . "DELETED\r\n"
      . "END\r\n"
      . "7\r\n"
      . "STORED\r\n"
      . "VALUE $k 0 100\r\n$val\r\nEND\r\n"
      . "DELETED\r\n"
      . "END\r\n";
    return ($req, $rep);
}

my $s = $srv->connect;
setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);

my ($req0, $rep0) = pipeline('k0000', 'n0000');
mc_is($s, $req0, $rep0, 'the pipeline in one write gets the expected replies');
ok(mc_silent($s, 0.2), 'and nothing more');

my $len = length $req0;
my @bad;
my $deadline = time + 60;
for my $i (1 .. $len - 1) {
    last if time > $deadline;
    my ($req, $rep) = pipeline(sprintf('k%04d', $i), sprintf('n%04d', $i));
    mc_send($s, substr($req, 0, $i));
    sleep 0.001;
    mc_send($s, substr($req, $i));
    my $got = mc_bytes($s, length $rep, 5);
    push @bad, $i if $got ne $rep;
    last if @bad > 5;
}
is("@bad", '', "split into two writes at each of the " . ($len - 1) . " offsets: same replies every time");
ok(mc_silent($s, 0.2), 'no stray bytes after the split runs');

{
    my ($req, $rep) = pipeline('kbyte', 'nbyte');
    mc_send($s, substr($req, $_, 1)) for 0 .. length($req) - 1;
    mc_is($s, undef, $rep, 'the pipeline sent one byte per write gets the same replies');
}

# Requests from several connections interleaved byte-wise do not mix.
{
    my @c = map { my $c = $srv->connect; setsockopt($c, IPPROTO_TCP, TCP_NODELAY, 1); $c } 1 .. 3;
    my @p = map { [pipeline("c$_" . 'xxx', "d$_" . 'yyy')] } 1 .. 3;
    my $max = 0;
    $max < length($_->[0]) and $max = length($_->[0]) for @p;
    for (my $off = 0; $off < $max; $off += 7) {
        for my $j (0 .. 2) {
            my $chunk = substr($p[$j][0], $off, 7);
            mc_send($c[$j], $chunk) if length $chunk;
        }
    }
    mc_is($c[$_], undef, $p[$_][1], "connection $_ of 3 interleaved pipelines gets its own replies") for 0 .. 2;
    close $_ for @c;
}

# Large pipelines: 1000 sets then 1000 gets in single writes.
{
    my $v = 'z' x 1000;
    mc_send($s, join '', map { "set bulk$_ $_ 0 1000\r\n$v\r\n" } 1 .. 1000);
    my $stored = 0;
    for (1 .. 1000) { $stored++ if mc_line($s) eq "STORED\r\n" }
    is($stored, 1000, '1000 pipelined sets are all STORED');
    mc_send($s, join '', map { "get bulk$_\r\n" } 1 .. 1000);
    my $expect = join '', map { "VALUE bulk$_ $_ 1000\r\n$v\r\nEND\r\n" } 1 .. 1000;
    my $got = mc_bytes($s, length $expect, 20);
    ok($got eq $expect, '1000 pipelined gets (about 1 MB of replies) come back in order');
    # 3000 gets of the same 1000-byte value: ~3 MB of replies to a 60 KB request
    # that is written before anything is read.
    mc_send($s, "get bulk7\r\n" x 3000);
    my $one = "VALUE bulk7 7 1000\r\n$v\r\nEND\r\n";
    $got = mc_bytes($s, 3000 * length $one, 30);
    ok($got eq $one x 3000, 'replies larger than the socket buffers all arrive (3000 gets)');
    ok(mc_silent($s, 0.2), 'and nothing more');
    # one get of five 900 KiB values
    my @big = map { chr(ord('A') + $_) x (900 * 1024) } 0 .. 4;
    mc_send($s, join '', map { "set huge$_ 0 0 " . length($big[$_]) . " noreply\r\n$big[$_]\r\n" } 0 .. 4);
    $expect = join('', map { "VALUE huge$_ 0 " . length($big[$_]) . "\r\n$big[$_]\r\n" } 0 .. 4) . "END\r\n";
    mc_send($s, "get huge0 huge1 huge2 huge3 huge4\r\n");
    $got = mc_bytes($s, length $expect, 30);
    ok($got eq $expect, 'one get of five 900 KiB values returns all 4.5 MB in order');
}

# A client that sends its requests and then half-closes (like
# "printf 'stats\r\n' | nc -q1 host port") still gets every reply, then EOF.
{
    my $h = $srv->connect;
    mc_send($h, "set half 0 0 2\r\nhc\r\n" . ("get half\r\n" x 2000));
    shutdown($h, 1);
    my $expect = "STORED\r\n" . ("VALUE half 0 2\r\nhc\r\nEND\r\n" x 2000);
    ok(mc_bytes($h, length $expect, 10) eq $expect, 'after a half-close, all 2001 replies still arrive');
    ok(mc_eof($h, 5), '... and then the server closes the connection');
    close $h;
}

close $s;
$srv->stop;
done_testing;

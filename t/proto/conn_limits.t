#!/usr/bin/perl
# t/proto/conn_limits.t: -o read_buf_mem_limit, the memory connections may
# hold in read buffers and response objects (split between the worker
# threads). A multi-get that needs more responses than fit is answered
# "SERVER_ERROR out of memory writing get response" and the connection
# goes on working; pipelined commands that outrun the limit close their
# connection; connections holding partial requests beyond it are closed.
# Counted as response_obj_oom and read_buf_oom.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use MCTest;

# 1 MB over 32 threads: 32 KiB a thread, two 16 KiB read buffers' worth.
my @limit = ('-o', 'read_buf_mem_limit=1', '-t', '32', '-R', '500');

{
    my $srv = start_server(@limit);
    my $s = $srv->connect;
    my $settings = mc_stats($s, 'settings');
    is($settings->{read_buf_mem_limit}, 1024 * 1024, 'stats settings: read_buf_mem_limit in bytes');

    mc_send($s, 'get ' . join(' ', map { "miss$_" } 1 .. 500) . "\r\n");
    is(mc_line($s), "SERVER_ERROR out of memory writing get response\r\n",
        'a 500-key multi-get over the limit is refused');
    my $st = mc_stats($s);
    cmp_ok($st->{response_obj_oom}, '>', 0, "counted as response_obj_oom ($st->{response_obj_oom})");

    mc_is($s, "set k1 0 0 2\r\nv1\r\n", "STORED\r\n", 'the connection still stores');
    mc_is($s, "set k2 5 0 2\r\nv2\r\n", "STORED\r\n", 'and stores again');
    mc_is($s, "get k1 missing k2\r\n", "VALUE k1 0 2\r\nv1\r\nVALUE k2 5 2\r\nv2\r\nEND\r\n",
        'a multi-get within the limit is answered, misses skipped');

    # 500 pipelined meta gets all wait for their replies before any is
    # written (-R 500): the memory runs out and the connection is closed
    # without a reply.
    my $p = $srv->connect;
    mc_send($p, "mg miss v\r\n" x 500);
    ok(mc_eof($p), 'pipelined commands over the limit close their connection');
    my $after = mc_stats($s);
    cmp_ok($after->{response_obj_oom}, '>', $st->{response_obj_oom}, 'counted as response_obj_oom');
    mc_is($s, "get k1\r\n", "VALUE k1 0 2\r\nv1\r\nEND\r\n", 'other connections are served');
    close $p;

    # Partial request lines hold a read buffer each: 128 connections over
    # 32 threads are 4 a thread, 2 of which fit.
    my @partial;
    for (1 .. 128) {
        my $c = $srv->connect;
        mc_send($c, 'set foo 0 0 2');    # no end of line yet
        push @partial, $c;
        sleep 0.005;
    }
    sleep 0.3;
    my $closed = grep { mc_eof($_, 0.05) } @partial;
    cmp_ok($closed, '>', 0, "connections over the read buffer limit were closed ($closed of 128)");
    cmp_ok($closed, '<', 128, 'connections within it were kept');
    close $_ for @partial;
    sleep 0.3;
    my $s2 = $srv->connect;
    my $rb = mc_stats($s2);
    cmp_ok($rb->{read_buf_oom}, '>', 0, "counted as read_buf_oom ($rb->{read_buf_oom})");
    mc_is($s2, "get k2\r\n", "VALUE k2 5 2\r\nv2\r\nEND\r\n", 'new connections are served afterwards');
    close $s2;
    close $s;
    $srv->stop;
}

# Without the option nothing is limited: the same multi-get is answered.
{
    my $srv = start_server('-t', '32', '-R', '500');
    my $s = $srv->connect;
    is(mc_stats($s, 'settings')->{read_buf_mem_limit}, 0, 'read_buf_mem_limit defaults to 0');
    mc_send($s, 'get ' . join(' ', map { "miss$_" } 1 .. 500) . "\r\n");
    is(mc_line($s), "END\r\n", 'without a limit the 500-key multi-get is answered');
    is(mc_stats($s)->{response_obj_oom}, 0, 'and nothing is counted');
    close $s;
    $srv->stop;
}

# Malformed values are refused at start, as memcached refuses them.
for my $bad ('read_buf_mem_limit', 'read_buf_mem_limit=abc', 'read_buf_mem_limit=-1') {
    my ($exited, $status, $out) = run_briefly(5, '-o', $bad);
    ok($exited && $status != 0, "-o $bad is refused");
    like($out, qr/read_buf_mem_limit/, "with a message naming the option");
}

done_testing();

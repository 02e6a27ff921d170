#!/usr/bin/perl
# t/proto/limits.t: resource limits: eviction under a small -m, -M turning
# eviction into "SERVER_ERROR out of memory storing object", -I and values
# larger than it, the 250-byte key limit, and the -c connection limit
# ("ERROR Too many open connections", counted in rejected_connections).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use MCTest;

my $value = 'v' x 1000;
my $count = 6000;    # about 3 times -m 2

# Sends set commands for keys $from..$to in batches; returns the reply lines.
sub fill {
    my ($s, $prefix, $from, $to) = @_;
    my @replies;
    for (my $i = $from; $i <= $to; $i += 100) {
        my $last = $i + 99 > $to ? $to : $i + 99;
        mc_send($s, join '', map { "set $prefix$_ 0 0 1000\r\n$value\r\n" } $i .. $last);
        push @replies, mc_line($s) for $i .. $last;
    }
    return @replies;
}

# eviction with -m 2
{
    my $srv = start_server('-m', '2');
    my $s = $srv->connect;
    my @r = fill($s, 'ev', 1, $count);
    is(scalar(grep { $_ eq "STORED\r\n" } @r), $count, "all $count sets of 1000 bytes into -m 2 are STORED");
    my $st = mc_stats($s);
    ok($st->{evictions} > 0, "evictions counted ($st->{evictions})");
    ok($st->{curr_items} < $count, "curr_items ($st->{curr_items}) is below the number stored");
    is($st->{total_items}, $count, 'total_items counts every store');
    mc_is($s, "get ev1\r\n", "END\r\n", 'the oldest item was evicted');
    mc_is($s, "get ev$count\r\n", "VALUE ev$count 0 1000\r\n$value\r\nEND\r\n", 'the newest item is there');
    close $s;
    $srv->stop;
}

# eviction is least-recently-used: a key read all along survives a flood
{
    my $srv = start_server('-m', '2');
    my $s = $srv->connect;
    mc_is($s, "set hot 0 0 1000\r\n$value\r\n", "STORED\r\n", 'set a key that will be read all along');
    mc_is($s, "set cold 0 0 1000\r\n$value\r\n", "STORED\r\n", 'set a key that will never be read');
    my $hot_hits = 0;
    for (my $i = 1; $i <= $count; $i += 200) {
        my @r = fill($s, 'lru', $i, $i + 199);
        mc_send($s, "get hot\r\n");
        $hot_hits++ if mc_until($s, "END\r\n") eq "VALUE hot 0 1000\r\n$value\r\nEND\r\n";
    }
    is($hot_hits, int(($count + 199) / 200), 'the key read between every 200 sets was never evicted');
    mc_is($s, "get cold\r\n", "END\r\n", 'the key never read was evicted');
    ok(mc_stats($s)->{evictions} > 0, 'evictions happened');
    my $items = mc_stats($s, 'items');
    my $evicted = 0;
    $evicted += $items->{$_} for grep { /^items:\d+:evicted$/ } keys %$items;
    ok($evicted > 0, 'stats items shows evicted items');
    close $s;
    $srv->stop;
}

# Under heavy eviction a hit is always the last value stored for its key:
# 2 rounds over 3000 keys of 100 B to 30 KB into -m 4.
{
    my $srv = start_server('-m', '4');
    my $s = $srv->connect;
    srand(7);
    my (%last, %prev);    # key => [flags, value] of the last successful set
    my ($stored, $sent) = (0, 0);
    for my $round (1 .. 2) {
        for my $i (1 .. 3000) {
            my $size = 100 + int(rand(rand() < 0.9 ? 5000 : 30_000));
            my $pattern = "r$round-k$i-";
            my $v = substr($pattern x (1 + int($size / length $pattern)), 0, $size);
            mc_send($s, "set mix$i $round 0 $size\r\n$v\r\n");
            $sent++;
            my $r = mc_line($s);
            if ($r eq "STORED\r\n") { $stored++; $last{"mix$i"} = [$round, $v]; delete $prev{"mix$i"} }
            elsif (exists $last{"mix$i"}) { $prev{"mix$i"} = delete $last{"mix$i"} }    # failed: old or none
        }
    }
    ok($stored > $sent * 0.9, "most of $sent sets of mixed sizes into -m 4 are STORED ($stored)");
    my ($hits, $wrong) = (0, 0);
    for my $i (1 .. 3000) {
        mc_send($s, "get mix$i\r\n");
        my $r = mc_until($s, "END\r\n");
        next if $r eq "END\r\n";
        $hits++;
        my @ok = grep { defined } $last{"mix$i"}, $prev{"mix$i"};
        next if grep { $r eq "VALUE mix$i $_->[0] " . length($_->[1]) . "\r\n$_->[1]\r\nEND\r\n" } @ok;
        $wrong++;
        diag("mix$i: got " . substr($r, 0, 40) . " expected one of " . join(", ", map { "$_->[0]:" . length($_->[1]) } @ok)) if $wrong <= 3;
    }
    ok($hits > 0 && $hits < 3000, "some keys survived the eviction, some did not ($hits of 3000)");
    is($wrong, 0, 'every surviving key holds exactly its last stored value and flags');
    close $s;
    $srv->stop;
}

# -m bounds the process's memory: 64 MB of values in four sizes into -m 16
{
    my $srv = start_server('-m', '16');
    my $s = $srv->connect;
    my $rss_before = rss_kb($srv->pid);
    my ($sent, $stored) = (0, 0);
    for my $size (100, 1000, 10_000, 100_000) {
        my $v = 'm' x $size;
        my $n = int(16 * 1024 * 1024 / $size);
        for (my $i = 0; $i < $n; $i += 100) {
            my $last = $i + 99 < $n ? $i + 99 : $n - 1;
            mc_send($s, join '', map { "set mem$size.$_ 0 0 $size\r\n$v\r\n" } $i .. $last);
            for ($i .. $last) { $sent++; $stored++ if mc_line($s) eq "STORED\r\n" }
        }
    }
    is($stored, $sent, "all $sent sets (64 MB) into -m 16 are STORED");
    my $growth = rss_kb($srv->pid) - $rss_before;
    ok($growth < (2 * 16 + 16) * 1024, "resident memory grew by $growth KB: less than twice -m plus 16 MB");
    close $s;
    $srv->stop;
}

sub rss_kb {
    my $pid = shift;
    open my $fh, '<', "/proc/$pid/status" or return 0;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)/ }
    return 0;
}

# -M: no eviction, out of memory errors
{
    my $srv = start_server('-m', '2', '-M');
    my $s = $srv->connect;
    my @r = fill($s, 'oom', 1, $count);
    my $stored = grep { $_ eq "STORED\r\n" } @r;
    my @errors = grep { $_ ne "STORED\r\n" } @r;
    ok($stored > 0 && $stored < $count, "with -M some sets succeed ($stored) and then fail");
    is($errors[0] // '', "SERVER_ERROR out of memory storing object\r\n",
        'a full cache with -M answers SERVER_ERROR out of memory storing object');
    is(scalar(grep { $_ ne "SERVER_ERROR out of memory storing object\r\n" } @errors), 0,
        'every failed set got that same error');
    my $st = mc_stats($s);
    is($st->{evictions}, 0, 'nothing evicted with -M');
    is($st->{curr_items}, $stored, 'curr_items equals the successful sets');
    mc_is($s, "get oom1\r\n", "VALUE oom1 0 1000\r\n$value\r\nEND\r\n", 'the oldest item is still there');
    is(mc_stats($s, 'settings')->{evictions}, 'off', 'settings evictions is off with -M');
    mc_is($s, "delete oom1\r\n", "DELETED\r\n", 'delete works on a full cache');
    mc_is($s, "get oom2\r\n", "VALUE oom2 0 1000\r\n$value\r\nEND\r\n", 'reads work on a full cache');
    mc_send($s, join '', map { "delete oom$_ noreply\r\n" } 2 .. 201);
    my @again = fill($s, 'again', 1, 150);
    is(scalar(grep { $_ eq "STORED\r\n" } @again), 150, 'after deleting 200 items, 150 new ones of the same size fit again');
    mc_is($s, "flush_all\r\n", "OK\r\n", 'flush_all on a full cache');
    my @after = fill($s, 'afterflush', 1, 1000);
    is(scalar(grep { $_ eq "STORED\r\n" } @after), 1000, 'after flush_all, the memory of flushed items is reused (1000 sets)');
    close $s;
    $srv->stop;
}

# item size limit (-I) and key length
{
    my $srv = start_server('-m', '64');
    my $s = $srv->connect;
    my $ok = 'a' x 1_000_000;
    mc_is($s, "set fits 0 0 1000000\r\n$ok\r\n", "STORED\r\n", 'a 1,000,000-byte value fits the default -I 1m');
    mc_is($s, "get fits\r\n", "VALUE fits 0 1000000\r\n$ok\r\nEND\r\n", 'and comes back whole');
    my $toobig = 'b' x (1024 * 1024 + 1);
    my $n = length $toobig;
    mc_is($s, "set fits 0 0 $n\r\n$toobig\r\n", "SERVER_ERROR object too large for cache\r\n",
        'a value over -I is SERVER_ERROR object too large for cache');
    mc_is($s, "get fits\r\n", "END\r\n", 'a failed set does not leave the old value behind');
    mc_is($s, "set keep 0 0 4\r\nkeep\r\n", "STORED\r\n", 'set a key for add/append over -I');
    mc_is($s, "add keep 0 0 $n\r\n$toobig\r\n", "SERVER_ERROR object too large for cache\r\n", 'add over -I is refused');
    mc_is($s, "append keep 0 0 $n\r\n$toobig\r\n", "SERVER_ERROR object too large for cache\r\n", 'append over -I is refused');
    mc_is($s, "get keep\r\n", "VALUE keep 0 4\r\nkeep\r\nEND\r\n", 'add/append over -I leave the value alone');
    mc_send($s, "set huge 0 0 4000000\r\n");
    mc_is($s, ('h' x 4_000_000) . "\r\n", "SERVER_ERROR object too large for cache\r\n",
        'a 4 MB value sent after its command line is refused and its data swallowed');
    mc_is($s, "get keep\r\n", "VALUE keep 0 4\r\nkeep\r\nEND\r\n", 'connection is in sync afterwards');
    mc_send($s, "set huge 0 0 $n noreply\r\n$toobig\r\n");
    ok(mc_silent($s, 0.3), 'a value over -I sent with noreply gets no error line either');
    mc_is($s, "get keep\r\n", "VALUE keep 0 4\r\nkeep\r\nEND\r\n", 'and the connection stays in sync');
    my $st = mc_stats($s);
    ok(($st->{store_too_large} // 0) >= 4, 'store_too_large counts the refused values');

    my $k250 = 'k' x 250;
    my $k251 = 'k' x 251;
    mc_is($s, "set $k250 0 0 1\r\nx\r\n", "STORED\r\n", 'a 250-byte key is accepted');
    mc_is($s, "get $k251\r\n", "CLIENT_ERROR bad command line format\r\n", 'get of a 251-byte key is CLIENT_ERROR');
    mc_send($s, "set $k251 0 0 1\r\nx\r\n");
    is(mc_line($s), "CLIENT_ERROR bad command line format\r\n", 'set of a 251-byte key is CLIENT_ERROR');
    ok(mc_resync($s), 'connection answers again after the long-key set');
    mc_is($s, "get $k250\r\n", "VALUE $k250 0 1\r\nx\r\nEND\r\n", 'the 250-byte key is intact');
    mc_is($s, "get a $k251\r\n", "CLIENT_ERROR bad command line format\r\n",
        'a multi-get with one over-long key is CLIENT_ERROR');
    my $many = join(' ', ("keep") x 300);
    mc_is($s, "get $many $k251 keep\r\n", "CLIENT_ERROR bad command line format\r\n",
        'a multi-get of 300 hits, then an over-long key: only CLIENT_ERROR');
    mc_is($s, "get $many\r\n", ("VALUE keep 0 4\r\nkeep\r\n" x 300) . "END\r\n",
        'a multi-get of 300 hits: 300 values, then END');
    mc_is($s, "delete $k251\r\n", "CLIENT_ERROR bad command line format\r\n", 'delete of a 251-byte key is CLIENT_ERROR');
    mc_is($s, "incr $k251 1\r\n", "CLIENT_ERROR bad command line format\r\n", 'incr of a 251-byte key is CLIENT_ERROR');
    mc_is($s, "touch $k251 1\r\n", "CLIENT_ERROR bad command line format\r\n", 'touch of a 251-byte key is CLIENT_ERROR');
    close $s;
    $srv->stop;

    my $srv2 = start_server('-m', '64', '-I', '2m');
    my $s2 = $srv2->connect;
    my $v = 'c' x (1536 * 1024);
    $n = length $v;
    mc_is($s2, "set big 0 0 $n\r\n$v\r\n", "STORED\r\n", 'a 1.5 MiB value is stored with -I 2m');
    mc_is($s2, "get big\r\n", "VALUE big 0 $n\r\n$v\r\nEND\r\n", 'and comes back whole');
    $v = 'd' x (2 * 1024 * 1024 + 1);
    $n = length $v;
    mc_is($s2, "set big2 0 0 $n\r\n$v\r\n", "SERVER_ERROR object too large for cache\r\n", 'a value over 2 MiB is refused with -I 2m');
    close $s2;
    $srv2->stop;
}

# -c: the connection limit
{
    my $max = 32;
    my $srv = start_server('-c', $max);
    my $first = $srv->connect;
    mc_is($first, "set c 0 0 1\r\nc\r\n", "STORED\r\n", 'first connection stores a key');
    my (@open, $rejected, $with_message, $closed_after);
    $rejected = $with_message = $closed_after = 0;
    my $deadline = time + 30;
    for my $i (1 .. 2 * $max) {
        last if $rejected >= 3 || time > $deadline;
        my $c = eval { $srv->connect } or do { $rejected++; next };
        if (!mc_silent($c, 0.15)) {    # something came without a request: a rejection
            my $line = mc_line($c, 2);
            $with_message++ if $line eq "ERROR Too many open connections\r\n";
            $closed_after++ if mc_eof($c, 2);
            $rejected++;
            next;
        }
        mc_send($c, "version\r\n");
        my $line = mc_line($c, 2);
        if ($line =~ /^VERSION /) { push @open, $c; next }
        $with_message++ if $line eq "ERROR Too many open connections\r\n";
        $rejected++;
    }
    ok($rejected > 0, "connections beyond -c $max are rejected ($rejected rejected after " . scalar(@open) . " accepted)");
    ok(@open + 1 <= $max, 'no more than -c connections were accepted');
    ok($with_message > 0, 'a rejected connection is told "ERROR Too many open connections"');
    ok($closed_after > 0, '... and then closed');
    mc_is($first, "get c\r\n", "VALUE c 0 1\r\nc\r\nEND\r\n", 'an accepted connection still works while others are rejected');
    my $st = mc_stats($first);
    ok($st->{rejected_connections} >= $rejected, "rejected_connections counts them ($st->{rejected_connections})");
    close $_ for @open;
    my $again;
    for (1 .. 40) {
        my $c = eval { $srv->connect };
        if ($c) {
            mc_send($c, "get c\r\n");
            my $r = mc_until($c, "END\r\n", 2);
            if ($r eq "VALUE c 0 1\r\nc\r\nEND\r\n") { $again = 1; close $c; last }
            close $c;
        }
        sleep 0.05;
    }
    ok($again, 'after connections close, new connections are served again');
    close $first;
    $srv->stop;
}

done_testing;

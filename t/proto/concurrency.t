#!/usr/bin/perl
# t/proto/concurrency.t: several client processes at once against one server
# (bounded: 6 clients x 400 operations, 60 s at most): no lost increments, no
# torn or mixed values, each client's own keys intact, cas lets exactly one
# of many racing writers win; 300 simultaneous connections.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time);
use MCTest;

my $clients = 6;
my $rounds  = 400;
my $srv = start_server('-m', '64', '-t', '4');
my $s = $srv->connect;
mc_is($s, "set counter 0 0 1\r\n0\r\n", "STORED\r\n", 'shared counter set to 0');

# Each child: for every round, set its own key to a value made of its id,
# incr the shared counter, append to its own log key, and read back its key.
# Exits 0 when every reply was the expected one, otherwise 1.
my @pids;
for my $id (1 .. $clients) {
    my $pid = fork();
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        my $ok = eval {
            my $c = $srv->connect;
            my $deadline = time + 60;
            mc_send($c, "set log$id 0 0 0\r\n\r\n");
            die "log set\n" unless mc_line($c) eq "STORED\r\n";
            for my $r (1 .. $rounds) {
                die "too slow\n" if time > $deadline;
                my $val = ($id x (10 + $r % 50)) . ":$r";
                my $len = length $val;
                mc_send($c, "set own$id 0 0 $len\r\n$val\r\nincr counter 1\r\nappend log$id 0 0 1\r\n.\r\nget own$id\r\n");
                die "set\n" unless mc_line($c) eq "STORED\r\n";
                die "incr\n" unless mc_line($c) =~ /^\d+\r\n\z/;
                die "append\n" unless mc_line($c) eq "STORED\r\n";
                die "get\n" unless mc_until($c, "END\r\n") eq "VALUE own$id 0 $len\r\n$val\r\nEND\r\n";
            }
            1;
        };
        print STDERR "# client $id: $@" unless $ok;
        POSIX::_exit($ok ? 0 : 1);    # _exit: the parent owns the server
    }
    push @pids, $pid;
}
my $failed = 0;
for my $pid (@pids) {
    waitpid($pid, 0);
    $failed++ if $?;
}
is($failed, 0, "$clients concurrent clients saw only expected replies over $rounds rounds each");
my $total = $clients * $rounds;
mc_is($s, "get counter\r\n", "VALUE counter 0 " . length($total) . "\r\n$total\r\nEND\r\n",
    'no increment was lost');
for my $id (1 .. $clients) {
    my $val = ($id x (10 + $rounds % 50)) . ":$rounds";
    mc_is($s, "get own$id log$id\r\n",
        "VALUE own$id 0 " . length($val) . "\r\n$val\r\nVALUE log$id 0 $rounds\r\n" . ('.' x $rounds) . "\r\nEND\r\n",
        "client $id: last value and $rounds appends intact");
}

# cas race: every client reads the same unique, then all try to cas at once.
mc_is($s, "set race 0 0 4\r\nnone\r\n", "STORED\r\n", 'race key set');
mc_send($s, "gets race\r\n");
my ($unique) = mc_until($s, "END\r\n") =~ /^VALUE race 0 4 (\d+)\r\n/;
my @conns = map { $srv->connect } 1 .. $clients;
mc_send($conns[$_ - 1], "cas race 0 0 4 $unique\r\nwin$_\r\n") for 1 .. $clients;
my @replies = map { mc_line($_) } @conns;
is(scalar(grep { $_ eq "STORED\r\n" } @replies), 1, 'exactly one of the racing cas commands wins');
is(scalar(grep { $_ eq "EXISTS\r\n" } @replies), $clients - 1, 'the others get EXISTS');
my ($winner) = grep { $replies[$_ - 1] eq "STORED\r\n" } 1 .. $clients;
mc_is($s, "get race\r\n", "VALUE race 0 4\r\nwin" . ($winner // '?') . "\r\nEND\r\n", 'the winner\'s value is stored');
close $_ for @conns;

# 300 connections open at once, each storing and reading its own key.
{
    my @many = map { $srv->connect } 1 .. 300;
    mc_send($many[$_], "set conn$_ 0 0 " . length($_) . "\r\n$_\r\n") for 0 .. $#many;
    my $stored = grep { mc_line($_) eq "STORED\r\n" } @many;
    is($stored, 300, '300 simultaneous connections each store a key');
    mc_send($many[$_], "get conn" . (299 - $_) . "\r\n") for 0 .. $#many;
    my $right = 0;
    for my $i (0 .. $#many) {
        my $k = 299 - $i;
        $right++ if mc_until($many[$i], "END\r\n") eq "VALUE conn$k 0 " . length($k) . "\r\n$k\r\nEND\r\n";
    }
    is($right, 300, 'each reads back the key another connection stored');
    ok(mc_stats($s)->{curr_connections} >= 301, 'curr_connections counts them all');
    close $_ for @many;
}

close $s;
$srv->stop;
done_testing;

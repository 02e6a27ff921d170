#!/usr/bin/perl
# t/proto/model.t: long random sequences of storage, retrieval, arithmetic,
# cas, touch and delete commands (fixed seed), each reply checked against a
# model of memcached's documented semantics. Phase 1 sends one command at a
# time over three connections; phase 2 pipelines batches of up to 16 commands
# on one connection. Bounded: 4000 + 3000 commands, 60 s each.
# MC_SEED=<n> replays another sequence.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use MCTest;

my $seed = $ENV{MC_SEED} // 20240611;
srand($seed);
diag("seed $seed");

my $srv = start_server('-m', '64');
my @conns = map { $srv->connect } 1 .. 3;
my @keys = map { "model:$_" } 1 .. 40;
my %item;    # key => { value, flags, cas (last seen via gets, if unchanged since) }
my %seen;    # command kind => count

sub rand_value {
    my $len = rand() < 0.05 ? int(rand(20000)) : int(rand(300));
    my @alphabet = ('a' .. 'z', '0' .. '9', ' ', "\r", "\n", "\0", "\xff");
    return join '', map { $alphabet[rand @alphabet] } 1 .. $len;
}

sub rand_number { return int(rand(10)) < 3 ? int(rand(1000)) : int(rand(2**31)) . int(rand(10**9)) }

sub value_line {
    my ($k) = @_;
    return "VALUE $k $item{$k}{flags} " . length($item{$k}{value}) . "\r\n";
}

# One random command on key $k: returns (request, expected reply, kind), and
# updates the model. Returns kind 'gets' (no request) when the caller should
# run a gets; cas only when $with_cas.
sub gen_op {
    my ($k, $with_cas) = @_;
    my $r = rand;
    $r = 0.70 + rand(0.12) if !$with_cas && $r >= 0.50 && $r < 0.70;    # no gets/cas: incr/decr instead
    if ($r < 0.30) {
        my $cmd = (qw(set set set add replace append prepend))[rand 7];
        my $v = rand() < 0.2 ? rand_number() : rand_value();
        my $f = rand() < 0.5 ? 0 : int(rand(2**32));
        my $req = "$cmd $k $f 0 " . length($v) . "\r\n$v\r\n";
        my $exists = exists $item{$k};
        if ($cmd eq 'set' || ($cmd eq 'add' && !$exists) || ($cmd eq 'replace' && $exists)) {
            $item{$k} = { value => $v, flags => $f };
            return ($req, "STORED\r\n", $cmd);
        }
        if (($cmd eq 'append' || $cmd eq 'prepend') && $exists) {
            $item{$k}{value} = $cmd eq 'append' ? $item{$k}{value} . $v : $v . $item{$k}{value};
            delete $item{$k}{cas};
            return ($req, "STORED\r\n", $cmd);
        }
        return ($req, "NOT_STORED\r\n", $cmd);
    }
    if ($r < 0.50) {
        my @ks = ($k, map { $keys[rand @keys] } 1 .. int(rand(4)));
        my $exp = join('', map { exists $item{$_} ? value_line($_) . "$item{$_}{value}\r\n" : '' } @ks);
        return ("get @ks\r\n", $exp . "END\r\n", 'get');
    }
    return (undef, undef, 'gets') if $r < 0.60;
    if ($r < 0.70) {
        my $v = rand_value();
        my $known = exists $item{$k} && defined $item{$k}{cas};
        my $u = $known && rand() < 0.7 ? $item{$k}{cas} : int(rand(2**40)) + 2**41;
        my $req = "cas $k 5 0 " . length($v) . " $u\r\n$v\r\n";
        return ($req, "NOT_FOUND\r\n", 'cas') unless exists $item{$k};
        return ($req, "EXISTS\r\n", 'cas') unless $known && $u eq $item{$k}{cas};
        $item{$k} = { value => $v, flags => 5 };
        return ($req, "STORED\r\n", 'cas');
    }
    if ($r < 0.82) {
        my $cmd = rand() < 0.5 ? 'incr' : 'decr';
        my $d = rand() < 0.1 ? '18446744073709551615' : int(rand(1000));
        my $req = "$cmd $k $d\r\n";
        return ($req, "NOT_FOUND\r\n", $cmd) unless exists $item{$k};
        my $v = $item{$k}{value};
        if ($v =~ /^[\s+]/ || ($v =~ /^\d+[\s\0]/ && $v !~ /^\d+\z/)) {
            # Digits followed by whitespace or NUL and more data: how much of
            # that memcached reads as a number is its implementation's
            # business; overwrite the key with a plain number instead.
            $v = rand_number();
            $item{$k} = { value => $v, flags => 0 };
            return ("set $k 0 0 " . length($v) . "\r\n$v\r\n", "STORED\r\n", 'set');
        }
        if ($v !~ /^\d{1,20}\z/ || (length($v) == 20 && $v gt '18446744073709551615')) {
            return ($req, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", $cmd);
        }
        require Math::BigInt;
        my $old = Math::BigInt->new($v);
        my $new = $cmd eq 'incr' ? ($old + Math::BigInt->new($d)) % Math::BigInt->new(2)->bpow(64)
          : ($old > $d ? $old - $d : Math::BigInt->new(0));
        # memcached may pad a shorter result with spaces; keep the model exact
        # by not decrementing when the digit count would drop.
        if ($cmd eq 'decr' && length("$new") < length($v)) {
            $req = "incr $k 0\r\n";
            $new = $old;
        }
        $item{$k}{value} = "$new";
        delete $item{$k}{cas};
        return ($req, "$new\r\n", $cmd);
    }
    if ($r < 0.90) {
        my $exp = exists $item{$k} ? "DELETED\r\n" : "NOT_FOUND\r\n";
        delete $item{$k};
        return ("delete $k\r\n", $exp, 'delete');
    }
    return ("touch $k 0\r\n", exists $item{$k} ? "TOUCHED\r\n" : "NOT_FOUND\r\n", 'touch');
}

sub printable {
    (my $t = substr($_[0] // '', 0, 70)) =~ s/[^\x20-\x7e]/./g;
    return $t;
}

# Runs a gets on $c and records the cas unique; returns an error or ''.
sub run_gets {
    my ($c, $k) = @_;
    mc_send($c, "gets $k\r\n");
    my $got = mc_until($c, "END\r\n");
    $seen{gets}++;
    return $got eq "END\r\n" ? '' : "gets $k: " . printable($got) unless exists $item{$k};
    my $head = "VALUE $k $item{$k}{flags} " . length($item{$k}{value}) . ' ';
    return "gets $k: " . printable($got)
      unless $got =~ /\A\Q$head\E(\d+)\r\n/ && substr($got, length("$head$1\r\n")) eq "$item{$k}{value}\r\nEND\r\n";
    $item{$k}{cas} = $1;
    return '';
}

# Phase 1: one command at a time, round robin over three connections.
my ($ops, @bad) = (0);
my $deadline = time + 60;
for my $n (1 .. 4000) {
    last if time > $deadline || @bad >= 10;
    my $c = $conns[$n % 3];
    my $k = $keys[rand @keys];
    my ($req, $expect, $kind) = gen_op($k, 1);
    $ops++;
    if ($kind eq 'gets') {
        my $err = run_gets($c, $k);
        push @bad, "op $n: $err" if $err;
        next;
    }
    mc_send($c, $req);
    my $got = mc_bytes($c, length $expect);
    $seen{$kind}++;
    next if $got eq $expect;
    push @bad, "op $n (" . printable($req) . "): expected " . printable($expect) . ' got ' . printable($got);
    mc_resync($c);
}
diag($_) for @bad;
is(scalar(@bad), 0, "phase 1: $ops random commands over 3 connections got the replies memcached's semantics give");
ok($ops >= 2000, "enough commands ran in the time bound ($ops)");
ok(($seen{$_} // 0) > 0, "the sequence exercised $_") for qw(set add replace append prepend get gets cas incr decr delete touch);

# Phase 2: pipelined batches of 1-16 commands on one connection.
my $c = $conns[0];
($ops, @bad) = (0);
$deadline = time + 60;
while ($ops < 3000 && time < $deadline && !@bad) {
    my (@reqs, @expects);
    for (1 .. 1 + int(rand(16))) {
        my ($req, $expect) = gen_op($keys[rand @keys], 0);
        push @reqs, $req;
        push @expects, $expect;
    }
    mc_send($c, join '', @reqs);
    my $expect = join '', @expects;
    my $got = mc_bytes($c, length $expect);
    $ops += @reqs;
    next if $got eq $expect;
    for my $i (0 .. $#reqs) {    # name the first command whose reply differs
        my $e = $expects[$i];
        if (substr($got, 0, length $e) ne $e) {
            push @bad, 'batch command ' . printable($reqs[$i]) . ': expected ' . printable($e) . ' got ' . printable($got);
            last;
        }
        substr($got, 0, length $e, '');
    }
}
diag($_) for @bad;
is(scalar(@bad), 0, "phase 2: $ops random commands in pipelined batches got the right replies in order");

# Final state: every key as the model says.
my $final = join '', map { exists $item{$_} ? value_line($_) . "$item{$_}{value}\r\n" : '' } @keys;
mc_is($conns[1], "get @keys\r\n", $final . "END\r\n", 'final contents of all 40 keys match the model');

close $_ for @conns;
$srv->stop;
done_testing;

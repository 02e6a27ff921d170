#!/usr/bin/perl
# t/clients/cache_memcached_fast.t: the real Perl client Cache::Memcached::Fast
# (Debian's libcache-memcached-fast-perl) against the server: set/get,
# get_multi, gets/cas, incr/decr, delete, add/replace/append/prepend, touch,
# expiry, serialized structures, UTF-8 and binary values, flush_all.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use Cache::Memcached::Fast;
use MCTest;

my $srv = start_server('-m', '64');
my $mc = Cache::Memcached::Fast->new({
    servers         => ['127.0.0.1:' . $srv->port],
    connect_timeout => 5,
    io_timeout      => 5,
    utf8            => 1,
});

my $v = $mc->server_versions;
like((values %$v)[0] // '', qr/^\S+$/, 'server_versions reports a version');

ok($mc->set('greeting', 'hello'), 'set');
is($mc->get('greeting'), 'hello', 'get returns the value');
is($mc->get('missing'), undef, 'get of a missing key is undef');

my %many = map { ("key$_" => "value $_") } 1 .. 50;
my $res = $mc->set_multi(map { [$_, $many{$_}] } keys %many);
is(scalar(grep { !$_ } values %$res), 0, 'set_multi of 50 keys: all stored');
my $got = $mc->get_multi(keys %many, 'nope1', 'nope2');
is_deeply($got, \%many, 'get_multi returns the 50 values and leaves out misses');

my $gets = $mc->gets('greeting');
is(ref $gets, 'ARRAY', 'gets returns [cas, value]');
is($gets->[1], 'hello', 'gets value');
ok($mc->cas('greeting', $gets->[0], 'hi'), 'cas with the current unique stores');
is($mc->get('greeting'), 'hi', 'cas stored the new value');
ok(!$mc->cas('greeting', $gets->[0], 'stale'), 'cas with a stale unique is refused');
is($mc->get('greeting'), 'hi', 'refused cas left the value alone');
ok(!$mc->cas('nosuch', $gets->[0], 'x'), 'cas on a missing key is refused');
is($mc->get('nosuch'), undef, 'refused cas created nothing');

ok($mc->set('counter', 10), 'set a counter');
is($mc->incr('counter'), 11, 'incr by the default 1');
is($mc->incr('counter', 9), 20, 'incr by 9');
is($mc->decr('counter', 5), 15, 'decr by 5');
my $zero = $mc->decr('counter', 100);
ok(defined $zero && $zero == 0, 'decr below zero stops at 0 (the client says 0E0)');
ok($mc->set('counter', '18446744073709551615'), 'set 2^64-1');
$zero = $mc->incr('counter', 1);
ok(defined $zero && $zero == 0, 'incr wraps at 2^64 to 0');
ok(!$mc->incr('nosuch', 1), 'incr of a missing key fails');

ok(!$mc->add('greeting', 'x'), 'add of an existing key fails');
ok($mc->add('fresh', 'new'), 'add of a new key');
ok(!$mc->replace('nosuch', 'x'), 'replace of a missing key fails');
ok($mc->replace('fresh', 'newer'), 'replace of an existing key');
ok($mc->append('fresh', '-tail'), 'append');
ok($mc->prepend('fresh', 'head-'), 'prepend');
is($mc->get('fresh'), 'head-newer-tail', 'append and prepend joined the data');

ok($mc->delete('fresh'), 'delete of an existing key');
ok(!$mc->delete('fresh'), 'delete of a missing key fails');
is($mc->get('fresh'), undef, 'deleted key is gone');

my $struct = { list => [1, 2, 3], name => 'x', nested => { a => undef } };
ok($mc->set('struct', $struct), 'set a Perl structure (serialized by the client)');
is_deeply($mc->get('struct'), $struct, 'the structure comes back');

my $utf8 = "h\x{e9}llo w\x{f6}rld \x{2713} \x{65e5}\x{672c}";
ok($mc->set('utf8', $utf8), 'set a non-ASCII (UTF-8) string');
is($mc->get('utf8'), $utf8, 'the non-ASCII string comes back');
my $bin = join('', map { chr } 0 .. 255) x 4 . "\r\nEND\r\n\0";
ok($mc->set('binary', $bin), 'set a binary value with every byte, CR LF and END');
is($mc->get('binary'), $bin, 'the binary value comes back byte for byte');
my $big = 'q' x (900 * 1024);
ok($mc->set('big', $big), 'set a 900 KiB value');
ok($mc->get('big') eq $big, 'the 900 KiB value comes back whole');

my $t0 = Time::HiRes::time();
my $gm = $mc->gets_multi(qw(greeting counter));
is(scalar(keys %$gm), 2, 'gets_multi returns both keys');
my $cm = $mc->cas_multi(['greeting', $gm->{greeting}[0], 'multi'], ['counter', $gm->{counter}[0] + 1000, 7]);
ok($cm->{greeting} && !$cm->{counter}, 'cas_multi: the right unique stores, a wrong one does not');
is($mc->get('greeting'), 'multi', 'cas_multi stored the value');
my $im = $mc->incr_multi(['counter', 5], 'nosuch');
ok(defined $im->{counter} && $im->{counter} == 5 && !$im->{nosuch}, 'incr_multi: one hit (0 + 5), one miss');
my $ns = Cache::Memcached::Fast->new({ servers => ['127.0.0.1:' . $srv->port], namespace => 'app1:',
    connect_timeout => 5, io_timeout => 5 });
ok($ns->set('k', 'inside'), 'set through a namespace');
is($mc->get('app1:k'), 'inside', 'the namespace is a key prefix on the server');
is($ns->get('k'), 'inside', 'get through the namespace');
$ns->disconnect_all;
my $gat = $mc->gat(100, 'greeting');
is($gat, 'multi', 'gat returns the value');

ok($mc->set('short', 's', 2), 'set with a 2 s expiry');
ok($mc->set('touched', 't', 100), 'set with a 100 s expiry');
ok($mc->touch('touched', 2), 'touch to 2 s');
ok(!$mc->touch('nosuch', 2), 'touch of a missing key fails');
ok($mc->set('long', 'l', 100), 'set with a 100 s expiry');
SKIP: {    # the server clock ticks in whole seconds
    my $late = Time::HiRes::time() - $t0;
    skip sprintf('host too slow: %.1f s passed since the 2 s items were stored', $late), 1 if $late > 1.0;
    is_deeply($mc->get_multi(qw(short touched long)), { short => 's', touched => 't', long => 'l' },
        'all present before expiry');
}
sleep 3.2;
is_deeply($mc->get_multi(qw(short touched long)), { long => 'l' },
    'after 3 s the 2 s items expired, the other remains');

ok($mc->flush_all, 'flush_all');
is($mc->get('long'), undef, 'flush_all removed everything');

$mc->disconnect_all;
$srv->stop;
done_testing;

# MCSASL.pm: a throw-away Cyrus SASL user database for the -S suites
# (t/binary/sasl.t, t/tls/sasl.t). sasl_userdb(@mechs) skips the whole test
# file when saslpasswd2 (Debian sasl2-bin) is missing, otherwise writes a
# memcached.conf naming the mechanisms and an sasldb holding user "alice"
# with password "secret" in a temporary directory, and points
# SASL_CONF_PATH there, as an operator does for memcached -S.
package MCSASL;
use strict;
use warnings;
use Exporter 'import';
use File::Temp qw(tempdir);
use Test::More;

our @EXPORT = qw(sasl_userdb);

sub sasl_userdb {
    my @mechs = @_;
    my ($saslpasswd) = grep { -x } map {"$_/saslpasswd2"} split(/:/, $ENV{PATH}), '/usr/sbin';
    plan skip_all => 'saslpasswd2 (Debian sasl2-bin) is not installed' unless $saslpasswd;
    my $dir = tempdir('mcsasl-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    open my $conf, '>', "$dir/memcached.conf" or die "$dir/memcached.conf: $!";
    print $conf "mech_list: @mechs\nsasldb_path: $dir/sasldb\n";
    close $conf;
    system("echo secret | $saslpasswd -f $dir/sasldb -a memcached -c -p alice") == 0
      or BAIL_OUT('saslpasswd2 failed');
    $ENV{SASL_CONF_PATH} = $dir;
    return $dir;
}

1;
